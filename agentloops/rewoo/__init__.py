"""ReWOO: plan every tool call up front, run them without the model, then solve.

One planner call writes the plan (tool calls with `#E<n>` placeholders for outputs that
do not exist yet), a worker runs it on an executor, each step as soon as its
dependencies are done, and one solver call answers from all the evidence.

`ReWOOPipeline` holds the settings and the public methods, `validate_plan` the public check;
the decisions are in `rewoo._machine`, the plan schema in `rewoo.schema`, the result in
`rewoo.result`, the prompts in `rewoo.prompts`. Rule: this package knows the engine,
structured output and the vocabulary below them, and no other loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from typing import Any, Literal

import pydantic

from agentloops._validation import field_errors
from agentloops.compaction import Compaction, with_compaction
from agentloops.engine import sync
from agentloops.engine.decisions import Decisions
from agentloops.engine.effects import Machine
from agentloops.engine.host import ToolHost
from agentloops.engine.journaled_runs import JournaledRuns
from agentloops.engine.meter import meter_for
from agentloops.engine.runner import Opening, Runner, new_run_id
from agentloops.engine.runs import Clock
from agentloops.engine.subruns import AgentTool, agent_tool
from agentloops.engine.tree import DEFAULT_MAX_DEPTH, Limits
from agentloops.errors import ConfigurationError, PlanValidationError, check_limits
from agentloops.events import Event, EventSink
from agentloops.journal import RunStore
from agentloops.messages import ToolOutcome
from agentloops.middleware import Chain, Middleware
from agentloops.model import ModelClient
from agentloops.output import OutputValidator, output_spec
from agentloops.rewoo import _machine
from agentloops.rewoo._plan import rewoo_problems
from agentloops.rewoo.prompts import PLANNER_SYSTEM, SOLVER_SYSTEM, TYPED_SOLVER_SYSTEM
from agentloops.rewoo.result import ReWOOResult
from agentloops.rewoo.schema import ReWOOPlan, ReWOOPlanStep
from agentloops.tools import Tool, ToolRegistry
from agentloops.usage import Amount, Price

__all__ = [
    "PLANNER_SYSTEM",
    "SOLVER_SYSTEM",
    "TYPED_SOLVER_SYSTEM",
    "ReWOOPipeline",
    "ReWOOPlan",
    "ReWOOPlanStep",
    "ReWOOResult",
    "validate_plan",
]


def validate_plan(
    plan: ReWOOPlan | dict[str, Any],
    registry: ToolRegistry | Iterable[Tool | Callable[..., Any]],
    *,
    max_steps: int = 20,
) -> None:
    """Check a plan before anything runs; report every problem at once.

    `plan` may be a `ReWOOPlan` or its JSON-like dict; `registry` a `ToolRegistry` or
    the tools themselves.

    Raises:
        PlanValidationError: `.problems` lists each problem, naming the steps involved
            (a dict that does not even match the plan schema is one problem per field).
    """
    if not isinstance(plan, ReWOOPlan):
        try:
            plan = ReWOOPlan.model_validate(plan)
        except pydantic.ValidationError as exc:
            raise PlanValidationError(field_errors(exc, root="plan", width=None)) from exc
    if not isinstance(registry, ToolRegistry):
        registry = ToolRegistry(registry)
    problems = rewoo_problems(plan, registry, max_steps)
    if problems:
        raise PlanValidationError(problems, plan=plan)


class ReWOOPipeline(JournaledRuns[ReWOOResult]):
    """Planner, worker, solver: two model calls however many tools run.

    Args:
        planner: the model that writes the plan (through `ask_structured`).
        tools: a `ToolRegistry`, or `Tool`s and typed functions.
        solver: the model that answers from the evidence (default: `planner`).
        executor: where tool steps run; any `concurrent.futures.Executor` (a process
            pool, Dask's). By default they run on daemon threads (under `arun`: asyncio
            tasks), at most `max_workers` at once, and a lone ready step runs inline.
        max_workers: how many steps run at once without an `executor`.
        max_plan_steps: a longer plan is rejected before any tool runs.
        on_tool_error: "evidence" (a failure is evidence marked as an error; steps that
            depend on it are not run) or "abort" (stop dispatching, wait for running
            steps, raise `ToolStepFailed` carrying the evidence so far).
        max_replans: how many times a plan may go back to the planner with its problems.
        replan_on_failure: also re-plan when steps failed (not only for invalid plans).
        max_evidence_chars: longer evidence is cut (head and tail, with a marker) in the
            solver prompt.
        planner_system: the planner's system prompt (`None`: `PLANNER_SYSTEM`); the tool
            list is appended to it.
        solver_system: the solver's system prompt (`None`: `SOLVER_SYSTEM`).
        max_retries: structured-output retries for one plan.
        max_tokens: output limit per model call (`None`: the client's default).
        on_event: receives every `Event`.
        store: a `RunStore`: each run is journaled as it goes, under a lease, and
            `resume(run_id)` continues it in any process (docs/durability.md).
        lease_ttl: seconds a run's lease lasts without renewal (renewed while it runs).
        max_cost: stop with `"budget"` before a model call once the run's calls cost this
            much (an amount in the price's currency; needs a price for every model that may
            answer: `price=`, a priced client, or the packaged table, else
            `ConfigurationError` here).
        price: what the models' tokens cost: one `Price`, or one per model name (see
            docs/models.md); without it, the clients' own prices. A run whose prices are
            known reports its `cost` and `cost_by_role`.
        deadline: seconds a run may take, wall clock (from its start, or from a resume):
            checked before each model call, and each call's timeout is what is left; the
            run stops with `"deadline"`. A tool call that started runs to its end.
        output_type: the type the solver's answer must have; `result.output` is the
            validated value (docs/typed-output.md). The default solver prompt is then
            `TYPED_SOLVER_SYSTEM`.
        output_validator: `fn(output, context)`, sync or async: returns the output
            (possibly changed; `None` keeps it) or raises `ModelRetry("why")`.
        max_output_retries: solver answers that may be rejected before the run stops with
            `"invalid_output"`.
        max_depth: how deep sub-runs (agent tools' calls) may nest below a run of this
            pipeline. An agent tool whose loop may pause for approval is refused in plans,
            as approval tools are: the worker cannot wait for a person.
        middleware: `Middleware` wrapping every model and tool call of a run (the
            planner's, each worker call, the solver's), in order (the first is
            outermost); they go into the run's fingerprint. See docs/middleware.md.
        compaction: keep the model's view of a run within its context window: a
            `Compaction`, or its `max_context_tokens` as an int (appended to
            `middleware`). See docs/context.md.

    Examples:
        >>> from agentloops.testing import ScriptedModel, respond_structured
        >>> def double(x: int) -> int:
        ...     '''Double a number.'''
        ...     return 2 * x
        >>> plan = {"steps": [
        ...     {"step_id": "#E1", "description": "2x", "tool_name": "double",
        ...      "tool_args": {"x": 4}},
        ...     {"step_id": "#E2", "description": "4x", "tool_name": "double",
        ...      "tool_args": {"x": "#E1"}, "depends_on": ["#E1"]}]}
        >>> model = ScriptedModel([respond_structured(plan), "16"])
        >>> result = ReWOOPipeline(model, [double]).run("Quadruple 4.")
        >>> result.answer, result.evidence["#E2"].content, result.model_calls
        ('16', '16', 2)
    """

    def __init__(
        self,
        planner: ModelClient,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        *,
        solver: ModelClient | None = None,
        executor: Executor | None = None,
        max_workers: int = 8,
        max_plan_steps: int = 20,
        on_tool_error: Literal["evidence", "abort"] = "evidence",
        max_replans: int = 0,
        replan_on_failure: bool = False,
        max_evidence_chars: int = 8000,
        planner_system: str | None = None,
        solver_system: str | None = None,
        max_retries: int = 2,
        max_tokens: int | None = None,
        on_event: EventSink | None = None,
        store: RunStore | None = None,
        lease_ttl: float = 30.0,
        max_cost: Amount | None = None,
        price: Price | Mapping[str, Price] | None = None,
        deadline: float | None = None,
        output_type: Any = None,
        output_validator: OutputValidator | None = None,
        max_output_retries: int = 2,
        max_depth: int = DEFAULT_MAX_DEPTH,
        middleware: Iterable[Middleware] = (),
        compaction: Compaction | int | None = None,
    ):
        check_limits(
            max_depth=(max_depth, 0),
            max_workers=(max_workers, 1),
            max_plan_steps=(max_plan_steps, 1),
            max_replans=(max_replans, 0),
            max_retries=(max_retries, 0),
            max_evidence_chars=(max_evidence_chars, 100),
        )
        if on_tool_error not in ("evidence", "abort"):
            raise ConfigurationError(
                f"on_tool_error must be 'evidence' or 'abort', got {on_tool_error!r}"
            )
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(
                f"executor must be a concurrent.futures.Executor: {executor!r}"
            )
        self.planner = planner
        self.solver = solver if solver is not None else planner
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.executor = executor
        self.max_workers = max_workers
        self.max_plan_steps = max_plan_steps
        self.on_tool_error = on_tool_error
        self.max_replans = max_replans
        self.replan_on_failure = replan_on_failure
        self.max_evidence_chars = max_evidence_chars
        self.planner_system = PLANNER_SYSTEM if planner_system is None else planner_system
        self.output_type = output_type
        self.output_validator = output_validator
        self.max_output_retries = max_output_retries
        self.output_spec = output_spec(output_type, output_validator, max_output_retries)
        """The output type's schema and checks (`None` without an `output_type`)."""
        default_solver = SOLVER_SYSTEM if output_type is None else TYPED_SOLVER_SYSTEM
        self.solver_system = default_solver if solver_system is None else solver_system
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.on_event = on_event
        self.store = store
        self.chain = Chain(with_compaction(middleware, compaction))
        """The run's `middleware`, checked and sorted by hook."""
        self._runner: Runner[ReWOOResult] = Runner(
            _machine.LOOP,
            store,
            lease_ttl,
            meter_for(
                [self.planner, self.solver], price=price, max_cost=max_cost, deadline=deadline
            ),
            milestones=True,  # its plan and steps, journaled for replay_events
        )
        self.max_cost, self.price, self.deadline = max_cost, price, deadline
        self.max_depth = max_depth

    # -- the three stages, public so each can be used (and tested) alone ------------

    def plan(self, task: str, *, run_id: str | None = None) -> ReWOOPlan:
        """Ask the planner for a plan and validate it (re-planning up to `max_replans`).

        Raises:
            PlanValidationError: the last plan was still invalid.
            ModelOutputError: the planner's output never matched the plan schema.
        """
        run = _machine.Run(run_id=run_id or new_run_id())
        machine = _machine.plan_machine(self, run, task, self.on_event is not None)
        return sync.run(machine, self._host(), self.on_event)

    def work(self, plan: ReWOOPlan, *, run_id: str | None = None) -> dict[str, ToolOutcome]:
        """Run the plan's tool calls (never the model); evidence in plan order. The calls'
        idempotency keys come from `run_id` (default: a new one, as for a run).

        Raises:
            PlanValidationError: the plan is invalid; nothing was dispatched.
            ToolStepFailed: with `on_tool_error="abort"`, a step failed; `.result`
                carries the evidence of the steps that finished.
        """
        validate_plan(plan, self.tools, max_steps=self.max_plan_steps)
        run = _machine.Run(run_id=run_id or new_run_id(), plan=plan)

        def body() -> Machine[dict[str, ToolOutcome]]:
            done = yield from _machine.work(self, run, plan, self.on_event is not None)
            if done.aborted_by is not None:
                raise _machine.aborted(run, done.aborted_by)
            return done.evidence

        return sync.run(body(), self._host(), self.on_event)

    def solve(
        self,
        task: str,
        plan: ReWOOPlan,
        evidence: Mapping[str, ToolOutcome],
        *,
        run_id: str | None = None,
        skipped: Iterable[str] | None = None,
    ) -> str:
        """One solver call: the answer from the task and every step's evidence.

        `skipped` names the steps that were not run (the worker's record); by default,
        the error evidence that says "not run" (as `work` writes it).
        """
        run = _machine.Run(run_id=run_id or new_run_id())
        if skipped is None:
            skipped = [k for k, o in evidence.items() if o.is_error and _machine.not_run(o)]
        machine = _machine.solve(self, run, task, plan, evidence, list(skipped))
        return sync.run(machine, self._host(), self.on_event).message.text

    # -- drivers -----------------------------------------------------------------------

    def run(self, task: str, *, run_id: str | None = None) -> ReWOOResult:
        """Plan, work, solve; re-plan on problems when allowed.

        Each error carries a `ReWOOResult` as `.result` holding what was done (usage,
        plan, evidence). With a `store`, the run is journaled under `run_id`.

        Raises:
            PlanValidationError: the plan was still invalid after the re-plans.
            ToolStepFailed: with `on_tool_error="abort"`, a step failed.
            ModelOutputError: the planner's output never matched the plan schema.
            ModelError: the planner or the solver failed.
        """
        return self._runner.run(self._fresh(task, run_id), self._host(), self.on_event)

    async def arun(self, task: str, *, run_id: str | None = None) -> ReWOOResult:
        """`run` on the event loop; steps run as tasks, still each as soon as its
        dependencies are done."""
        return await self._runner.arun(self._fresh(task, run_id), self._host(), self.on_event)

    def stream(self, task: str, *, run_id: str | None = None) -> Iterator[Event | ReWOOResult]:
        """Every event of the run as it happens (deltas included), then the result."""
        return self._runner.stream(self._fresh(task, run_id), self._host(), self.on_event)

    def astream(
        self, task: str, *, run_id: str | None = None
    ) -> AsyncIterator[Event | ReWOOResult]:
        """`stream` on the event loop."""
        return self._runner.astream(self._fresh(task, run_id), self._host(), self.on_event)

    def resume(
        self,
        run_id: str,
        decisions: Decisions | None = None,
        *,
        allow_changes: Collection[str] = (),
    ) -> ReWOOResult:
        """Continue a journaled run (needs a `store`): what it recorded is replayed without
        calling any model or tool again, then it goes on live. `decisions` settle calls in
        doubt (`CallInDoubt`): "rerun" runs one again, "skip" records it as not run.

        The pipeline must be built as the one that started the run (its prompts, tools and
        limits: the run's fingerprint), but for the parts `allow_changes` names.

        Raises:
            RunLeased: another process drives the run now.
            CheckpointError: the run was started with other settings, or its journal is
                damaged.
        """
        opening = self._journaled(run_id, decisions, allow_changes)
        return self._runner.run(opening, self._host(), self.on_event)

    async def aresume(
        self,
        run_id: str,
        decisions: Decisions | None = None,
        *,
        allow_changes: Collection[str] = (),
    ) -> ReWOOResult:
        """`resume` on the event loop."""
        opening = self._journaled(run_id, decisions, allow_changes)
        return await self._runner.arun(opening, self._host(), self.on_event)

    def _fresh(self, task: str, run_id: str | None) -> Opening[ReWOOResult]:
        def build(run_id: str, observed: bool) -> Machine[ReWOOResult]:
            return self.machine(task, run_id=run_id, observed=observed)

        return self._runner.fresh(build, run_id, lambda: {"task": task}, self._fingerprint)

    def _journaled(
        self, run_id: str, decisions: Decisions | None, allow_changes: Collection[str]
    ) -> Opening[ReWOOResult]:
        return self._runner.journaled(
            run_id, decisions, self._rebuilt, self._fingerprint, allow_changes
        )

    def _fingerprint(self) -> dict[str, object]:
        """What this pipeline's decisions depend on: kept with each durable run, and
        checked when it is resumed (`engine._fingerprint`)."""
        return {
            "planner_system": self.planner_system,
            "solver_system": self.solver_system,
            "tools": self.tools,
            "max_plan_steps": self.max_plan_steps,
            "on_tool_error": self.on_tool_error,
            "max_replans": self.max_replans,
            "replan_on_failure": self.replan_on_failure,
            "max_evidence_chars": self.max_evidence_chars,
            "max_retries": self.max_retries,
            "max_tokens": self.max_tokens,
            "max_cost": None if self.max_cost is None else str(self.max_cost),
            "output_type": None if self.output_spec is None else self.output_spec.schema,
            "max_output_retries": self.max_output_retries,
            "middleware": self.chain.fingerprint(),
        }

    def _rebuilt(self, meta: dict[str, Any], run_id: str, observed: bool) -> Machine[ReWOOResult]:
        parent = meta.get("parent_run_id")
        return _machine.machine(
            self, meta["task"], run_id=run_id, observed=observed, parent_run_id=parent
        )

    def _host(self) -> ToolHost:
        host = ToolHost(self.tools, self.executor)
        if self.tools.hosted:  # agent tools: each run tops a tree of runs
            return dataclasses.replace(host, limits=self._limits())
        return host

    # -- as a sub-run (an agent tool's) ------------------------------------------------

    def as_tool(
        self, name: str, description: str, *, input_type: type[Any] | None = None
    ) -> AgentTool:
        """This pipeline as a tool of another loop: each call is a sub-run (plan, work,
        solve) driven by the calling run's driver, whose answer is the call's result; see
        `ReActLoop.as_tool` and docs/multi-agent.md."""
        return agent_tool(self, name, description, input_type=input_type)

    def _limits(self) -> Limits:
        spec = self._runner.meter
        return Limits(
            max_cost=getattr(spec, "max_cost", None),
            max_depth=self.max_depth,
            deadline=self.deadline,
            pricer=getattr(spec, "pricer", None),
            owner=id(self),
        )

    def _sub_machine(
        self, task: str, *, run_id: str, parent_run_id: str, observed: bool
    ) -> Machine[ReWOOResult]:
        return _machine.machine(
            self, task, run_id=run_id, observed=observed, parent_run_id=parent_run_id
        )

    def _sub_resume(
        self, state: dict[str, Any], decisions: dict[str, bool], *, observed: bool
    ) -> Machine[ReWOOResult]:
        raise ConfigurationError("a ReWOO run never pauses for approval: nothing to resume")

    def _paused_state(self, result: ReWOOResult) -> None:
        return None

    def _may_pause(self, seen: set[int]) -> bool:
        return False  # plans may not use tools that ask a person (rewoo._plan)

    # -- the machine -------------------------------------------------------------------

    def machine(
        self,
        task: str,
        *,
        run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[ReWOOResult]:
        """The run as a step machine (see `agentloops.engine`): plan, work, solve (without a
        `run_id`, under a new one)."""
        return _machine.machine(
            self, task, run_id=run_id or new_run_id(), observed=observed, clock=clock
        )
