"""Plan-and-Execute: a planner splits the task, each step runs as its own ReAct loop, and a
reporter writes the answer from the step results.

A step starts from its own text and a digest of earlier findings, never from earlier
transcripts, so each step's context stays small. Every run is journaled in a run store
(the one given as `store=` or `checkpointer=`, or the loop's own in memory), so a run
resumes from its last recorded outcome (docs/durability.md).

`PlanAndExecute` holds the settings and the public methods; the decisions are in
`plan_execute._machine`, the plan schema in `plan_execute.schema`, the result and the
run's state in `plan_execute.result`, the prompts in `plan_execute.prompts`. Rule: this package
knows the engine, structured output and `agentloops.react` (each step is a ReAct run: the
one loop-to-loop edge), and no other loop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from agentloops.compaction import Compaction, with_compaction
from agentloops.engine.decisions import Decisions
from agentloops.engine.effects import Machine
from agentloops.engine.host import ToolHost
from agentloops.engine.journaled_runs import JournaledRuns
from agentloops.engine.meter import meter_for
from agentloops.engine.runner import Opening, Runner, new_run_id
from agentloops.engine.runs import Clock
from agentloops.engine.session import check_store
from agentloops.engine.subruns import AgentTool, agent_tool
from agentloops.engine.tree import DEFAULT_MAX_DEPTH, Limits
from agentloops.errors import ConfigurationError, check_limits
from agentloops.events import Event, EventSink
from agentloops.journal import RunStore
from agentloops.journal.memory import MemoryStore
from agentloops.middleware import Chain, Middleware
from agentloops.model import ModelClient
from agentloops.output import OutputValidator, output_spec
from agentloops.plan_execute import _machine
from agentloops.plan_execute.prompts import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    REPLANNER_SYSTEM,
    REPORTER_SYSTEM,
)
from agentloops.plan_execute.result import PlanExecuteResult
from agentloops.plan_execute.schema import Plan, PlanRevision, PlanStep, plan_problems
from agentloops.react import ReActLoop
from agentloops.tools import ApprovalPolicy, Tool, ToolRegistry
from agentloops.usage import Amount, Price

__all__ = [
    "EXECUTOR_SYSTEM",
    "PLANNER_SYSTEM",
    "REPLANNER_SYSTEM",
    "REPORTER_SYSTEM",
    "Plan",
    "PlanAndExecute",
    "PlanExecuteResult",
    "PlanRevision",
    "PlanStep",
    "plan_problems",
]


class PlanAndExecute(JournaledRuns[PlanExecuteResult]):
    """Plan once, run each step as a ReAct loop, report.

    Args:
        planner: the model that plans (and re-plans).
        tools: a `ToolRegistry`, or `Tool`s and typed functions, for the steps.
        executor: the model that runs the steps (default: `planner`); often a cheaper one.
        reporter: the model that writes the answer (default: `planner`).
        max_plan_steps: longest plan accepted (including steps added by re-planning).
        max_step_iterations: model turns per step; a step that uses them all is
            recorded as incomplete and the run goes on.
        replan: after each step, ask the replanner whether to revise the remaining
            steps; an invalid first plan also goes back to the planner with its problems.
        max_replans: how many revisions (and rejected plans) are allowed in a run.
        checkpointer: another name for `store` (old code's), e.g.
            `SQLiteCheckpointer(path)`, which is `SQLiteStore(path)`; give one or the
            other. An object with only the old `save`/`load`/`delete` methods is refused.
        approval: a policy for tool calls in the steps (see `ReActLoop`).
        on_event: receives this run's events and those of each step's ReAct loop.
        max_retries: retries for the planner's and replanner's structured output.
        max_digest_chars: how much of each earlier step's result a step sees.
        max_tokens: output limit per model call (`None`: the client's default).
        planner_system: the planner's system prompt (`None`: `PLANNER_SYSTEM`).
        executor_system: the system prompt of each step's ReAct loop (`None`:
            `EXECUTOR_SYSTEM`).
        reporter_system: the reporter's system prompt (`None`: `REPORTER_SYSTEM`).
        replanner_system: the replanner's system prompt (`None`: `REPLANNER_SYSTEM`).
        store: a `RunStore`: every outcome is journaled as the run goes, under a lease,
            and `resume(run_id)` replays it in any process (docs/durability.md). Without
            one (nor a checkpointer), runs are journaled in this loop's own memory until
            they finish: a paused or failed run can still be resumed in this process.
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
        output_type: the type the reporter's answer must have; `result.output` is the
            validated value (docs/typed-output.md). The steps still answer in text.
        output_validator: `fn(output, context)`, sync or async: returns the output
            (possibly changed; `None` keeps it) or raises `ModelRetry("why")`.
        max_output_retries: reporter answers that may be rejected before the run stops
            with `"invalid_output"`.
        max_depth: how deep sub-runs (the steps' agent tools' calls) may nest below a run.
        middleware: `Middleware` wrapping every model and tool call of a run (the
            planner's, each step's, the reporter's), in order (the first is outermost);
            they go into the run's fingerprint. See docs/middleware.md.
        compaction: keep the model's view of a run within its context window: a
            `Compaction`, or its `max_context_tokens` as an int (appended to
            `middleware`). See docs/context.md.

    The default prompts are module constants of `agentloops.plan_execute`; read them
    there, or in docs/plan-and-execute.md.
    """

    def __init__(
        self,
        planner: ModelClient,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        *,
        executor: ModelClient | None = None,
        reporter: ModelClient | None = None,
        max_plan_steps: int = 8,
        max_step_iterations: int = 10,
        replan: bool = False,
        max_replans: int = 2,
        checkpointer: RunStore | None = None,
        approval: ApprovalPolicy | None = None,
        on_event: EventSink | None = None,
        max_retries: int = 2,
        max_digest_chars: int = 2000,
        max_tokens: int | None = None,
        planner_system: str | None = None,
        executor_system: str | None = None,
        reporter_system: str | None = None,
        replanner_system: str | None = None,
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
            max_plan_steps=(max_plan_steps, 1),
            max_step_iterations=(max_step_iterations, 1),
            max_replans=(max_replans, 0),
            max_retries=(max_retries, 0),
            max_digest_chars=(max_digest_chars, 100),
        )
        self.planner = planner
        self.executor = executor if executor is not None else planner
        self.reporter = reporter if reporter is not None else planner
        self.step_loop = ReActLoop(
            self.executor,
            tools,
            system=EXECUTOR_SYSTEM if executor_system is None else executor_system,
            max_steps=max_step_iterations,
            max_tokens=max_tokens,
            approval=approval,
            on_event=on_event,
        )
        self.step_loop.role = "executor"  # its calls are the executor's (the cost per role)
        self.tools = self.step_loop.tools
        self.max_plan_steps = max_plan_steps
        self.replan = replan
        self.max_replans = max_replans
        if checkpointer is not None:
            if store is not None:
                raise ConfigurationError(
                    "give store= or checkpointer= (another name for it), not both"
                )
            store = check_store(checkpointer, "checkpointer")
        self.store = store
        """The run store given (as `store=` or `checkpointer=`), or `None`."""
        self.chain = Chain(with_compaction(middleware, compaction))
        """The run's `middleware` (around the steps' calls too), checked and sorted."""
        self._runner: Runner[PlanExecuteResult] = Runner(
            _machine.LOOP,
            store if store is not None else MemoryStore(),
            lease_ttl,
            meter_for(
                [self.planner, self.executor, self.reporter],
                price=price,
                max_cost=max_cost,
                deadline=deadline,
            ),
            forget_finished=store is None,  # its own store keeps what can still resume
            milestones=True,  # its plan and steps, journaled for replay_events
        )
        self.max_cost, self.price, self.deadline = max_cost, price, deadline
        self.max_depth = max_depth
        self.on_event = on_event
        self.max_retries = max_retries
        self.max_digest_chars = max_digest_chars
        self.max_tokens = max_tokens
        self.planner_system = PLANNER_SYSTEM if planner_system is None else planner_system
        self.reporter_system = REPORTER_SYSTEM if reporter_system is None else reporter_system
        self.replanner_system = REPLANNER_SYSTEM if replanner_system is None else replanner_system
        self.output_type = output_type
        self.output_validator = output_validator
        self.max_output_retries = max_output_retries
        self.output_spec = output_spec(output_type, output_validator, max_output_retries)
        """The output type's schema and checks (`None` without an `output_type`)."""

    # -- drivers -------------------------------------------------------------------

    def run(self, task: str, *, run_id: str | None = None) -> PlanExecuteResult:
        """Plan, run every step, report. Stops early only to wait for an approval.

        Raises:
            RunExists: `run_id` is taken (resume it, or pick another).
            PlanValidationError: the plan is invalid (and no re-plan is left).
            AgentLoopsError: a model failure; `.result` holds what finished, and
                `resume(run_id)` continues from there.
        """
        return self._runner.run(self._fresh(task, run_id), self._host(), self.on_event)

    async def arun(self, task: str, *, run_id: str | None = None) -> PlanExecuteResult:
        """`run` on the event loop."""
        return await self._runner.arun(self._fresh(task, run_id), self._host(), self.on_event)

    def stream(
        self, task: str, *, run_id: str | None = None
    ) -> Iterator[Event | PlanExecuteResult]:
        """Every event of the run as it happens (the steps' too, deltas included), then
        the result."""
        return self._runner.stream(self._fresh(task, run_id), self._host(), self.on_event)

    def astream(
        self, task: str, *, run_id: str | None = None
    ) -> AsyncIterator[Event | PlanExecuteResult]:
        """`stream` on the event loop."""
        return self._runner.astream(self._fresh(task, run_id), self._host(), self.on_event)

    def resume(
        self,
        run_id: str,
        decisions: Decisions | None = None,
        *,
        allow_changes: Collection[str] = (),
    ) -> PlanExecuteResult:
        """Continue a run from its last recorded outcome.

        The run's lease is taken, the decisions are recorded under it (exactly once across
        processes), and the journal is replayed: nothing on record runs again. A finished
        run's result comes back without calling any model. A run paused for approval needs
        `decisions` (call id to approved, as for `ReActLoop.resume`; "rerun" or "skip" for a
        call in doubt); without them it stays paused. Without a store, only this loop's
        runs that have not finished can be resumed, in this process. The run's fingerprint
        (its prompts, tools and limits) must match this loop's, but for the parts
        `allow_changes` names.

        Raises:
            RunNotFound: no run has this id.
            RunLeased: another process (or thread) drives the run now.
            CheckpointError: the run is another loop's, from a newer agentloops, was
                started with other settings (that `allow_changes` does not name), or its
                journal does not match this loop's settings.
            ConfigurationError: decisions naming calls that do not wait for one, or
                contradicting a recorded decision.
        """
        opening = self._again(run_id, decisions, allow_changes)
        return self._runner.run(opening, self._host(), self.on_event)

    async def aresume(
        self,
        run_id: str,
        decisions: Decisions | None = None,
        *,
        allow_changes: Collection[str] = (),
    ) -> PlanExecuteResult:
        """`resume` on the event loop."""
        opening = self._again(run_id, decisions, allow_changes)
        return await self._runner.arun(opening, self._host(), self.on_event)

    def _fresh(self, task: str, run_id: str | None) -> Opening[PlanExecuteResult]:
        def build(run_id: str, observed: bool) -> Machine[PlanExecuteResult]:
            return self.machine(task, run_id=run_id, observed=observed)

        return self._runner.fresh(build, run_id, lambda: {"task": task}, self._fingerprint)

    def _again(
        self, run_id: str, decisions: Decisions | None, allow_changes: Collection[str]
    ) -> Opening[PlanExecuteResult]:
        return self._runner.journaled(
            run_id, decisions, self._rebuilt, self._fingerprint, allow_changes
        )

    def _fingerprint(self) -> dict[str, object]:
        """What this loop's decisions depend on: kept with each durable run, and checked
        when it is resumed (`engine._fingerprint`). Each step is a ReAct run of
        `step_loop`: its prompt, tools and turn limit count here."""
        steps = self.step_loop
        return {
            "planner_system": self.planner_system,
            "executor_system": steps.system,
            "reporter_system": self.reporter_system,
            "replanner_system": self.replanner_system,
            "tools": self.tools,
            "max_plan_steps": self.max_plan_steps,
            "max_step_iterations": steps.max_steps,
            "replan": self.replan,
            "max_replans": self.max_replans,
            "max_retries": self.max_retries,
            "max_digest_chars": self.max_digest_chars,
            "max_tokens": self.max_tokens,
            "max_cost": None if self.max_cost is None else str(self.max_cost),
            "output_type": None if self.output_spec is None else self.output_spec.schema,
            "max_output_retries": self.max_output_retries,
            "middleware": self.chain.fingerprint(),
        }

    def _rebuilt(
        self, meta: dict[str, Any], run_id: str, observed: bool
    ) -> Machine[PlanExecuteResult]:
        parent = meta.get("parent_run_id")
        return _machine.machine(
            self, meta["task"], run_id=run_id, observed=observed, parent_run_id=parent
        )

    def _host(self) -> ToolHost:
        host = ToolHost(self.tools)
        if self.tools.hosted:  # the steps have agent tools: each run tops a tree of runs
            return dataclasses.replace(host, limits=self._limits())
        return host

    # -- as a sub-run (an agent tool's) ------------------------------------------------

    def as_tool(
        self, name: str, description: str, *, input_type: type[Any] | None = None
    ) -> AgentTool:
        """This loop as a tool of another loop: each call is a sub-run (plan, steps,
        report) driven by the calling run's driver, whose answer is the call's result; a
        step's pause for approval pauses the caller. See `ReActLoop.as_tool` and
        docs/multi-agent.md."""
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
    ) -> Machine[PlanExecuteResult]:
        return _machine.machine(
            self, task, run_id=run_id, observed=observed, parent_run_id=parent_run_id
        )

    def _sub_resume(
        self, state: dict[str, Any], decisions: dict[str, bool], *, observed: bool
    ) -> Machine[PlanExecuteResult]:
        raise AssertionError("a Plan-and-Execute sub-run is always journaled")  # pragma: no cover

    def _paused_state(self, result: PlanExecuteResult) -> dict[str, Any] | None:
        return None  # its state is its journal (the caller's store, or this loop's own)

    def _may_pause(self, seen: set[int]) -> bool:
        return self.step_loop._may_pause(seen)

    # -- the machine ----------------------------------------------------------------

    def machine(
        self,
        task: str,
        *,
        run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[PlanExecuteResult]:
        """The run as a step machine (see `agentloops.engine`), under `run_id` (without one,
        a new one). It reads no store: a run is resumed by replaying its journal into this
        machine (`agentloops.engine.durable`)."""
        return _machine.machine(
            self, task, run_id=run_id or new_run_id(), observed=observed, clock=clock
        )
