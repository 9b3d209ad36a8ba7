"""ReWOO: plan every tool call up front, run them without the model, then solve.

One planner call writes the plan (tool calls with `#E<n>` placeholders for outputs that
do not exist yet), a worker runs it on an executor, each step as soon as its
dependencies are done, and one solver call answers from all the evidence.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloops._rewoo_plan import rewoo_problems, validate_plan
from agentloops._rewoo_prompts import (
    PLANNER_SYSTEM,
    SOLVER_SYSTEM,
    planner_prompt,
    planner_system,
    solver_prompt,
)
from agentloops._rewoo_result import ReWOOResult, ReWOOStopReason
from agentloops._rewoo_schema import ReWOOPlan, ReWOOPlanStep
from agentloops._rewoo_worker import NOT_RUN, Work, work_machine
from agentloops.engine import session, sync
from agentloops.engine.effects import Emit, Machine
from agentloops.engine.host import ToolHost
from agentloops.engine.runs import Clock, Totals, lifecycle
from agentloops.errors import (
    AgentLoopsError,
    ConfigurationError,
    ModelOutputError,
    PlanValidationError,
    ToolStepFailed,
    check_limits,
)
from agentloops.events import Event, EventSink, PlanMade, Replanned
from agentloops.journal import RunStore
from agentloops.model import ModelClient, ModelResponse
from agentloops.structured import reply_stop, structured_machine, text_machine
from agentloops.tools import Tool, ToolOutcome, ToolRegistry

_LOOP = "rewoo"

__all__ = [
    "PLANNER_SYSTEM",
    "SOLVER_SYSTEM",
    "ReWOOPipeline",
    "ReWOOPlan",
    "ReWOOPlanStep",
    "ReWOOResult",
    "validate_plan",
]


@dataclass(kw_only=True)
class _Run:
    run_id: str
    totals: Totals = field(default_factory=Totals)
    replans: int = 0
    plan: ReWOOPlan | None = None
    evidence: dict[str, ToolOutcome] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


class ReWOOPipeline:
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
    ):
        check_limits(
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
        self.solver_system = SOLVER_SYSTEM if solver_system is None else solver_system
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.on_event = on_event
        self.store = store
        self._durability = session.Durability(store, lease_ttl) if store is not None else None

    # -- the three stages, public so each can be used (and tested) alone ------------

    def plan(self, task: str, *, run_id: str = "") -> ReWOOPlan:
        """Ask the planner for a plan and validate it (re-planning up to `max_replans`).

        Raises:
            PlanValidationError: the last plan was still invalid.
            ModelOutputError: the planner's output never matched the plan schema.
        """
        machine = self._plan(_Run(run_id=run_id), task, self.on_event is not None)
        return sync.run(machine, self._host(), self.on_event)

    def work(self, plan: ReWOOPlan, *, run_id: str = "") -> dict[str, ToolOutcome]:
        """Run the plan's tool calls (never the model); evidence in plan order.

        Raises:
            PlanValidationError: the plan is invalid; nothing was dispatched.
            ToolStepFailed: with `on_tool_error="abort"`, a step failed; `.result`
                carries the evidence of the steps that finished.
        """
        validate_plan(plan, self.tools, max_steps=self.max_plan_steps)
        run = _Run(run_id=run_id, plan=plan)

        def body() -> Machine[dict[str, ToolOutcome]]:
            done = yield from self._work(run, plan, self.on_event is not None)
            if done.aborted_by is not None:
                raise self._aborted(run, done.aborted_by)
            return done.evidence

        return sync.run(body(), self._host(), self.on_event)

    def solve(
        self,
        task: str,
        plan: ReWOOPlan,
        evidence: Mapping[str, ToolOutcome],
        *,
        run_id: str = "",
        skipped: Iterable[str] | None = None,
    ) -> str:
        """One solver call: the answer from the task and every step's evidence.

        `skipped` names the steps that were not run (the worker's record); by default,
        the error evidence that says "not run" (as `work` writes it).
        """
        run = _Run(run_id=run_id)
        if skipped is None:
            skipped = [k for k, o in evidence.items() if o.is_error and _not_run(o)]
        machine = self._solve(run, task, plan, evidence, list(skipped))
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
        opener, make = self._start(task, run_id, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def arun(self, task: str, *, run_id: str | None = None) -> ReWOOResult:
        """`run` on the event loop; steps run as tasks, still each as soon as its
        dependencies are done."""
        opener, make = self._start(task, run_id, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def stream(self, task: str, *, run_id: str | None = None) -> Iterator[Event | ReWOOResult]:
        """Every event of the run as it happens (deltas included), then the result."""
        opener, make = self._start(task, run_id, True)
        return session.stream(opener, make, self._host(), self.on_event)

    def astream(
        self, task: str, *, run_id: str | None = None
    ) -> AsyncIterator[Event | ReWOOResult]:
        """`stream` on the event loop."""
        opener, make = self._start(task, run_id, True)
        return session.astream(opener, make, self._host(), self.on_event)

    def resume(self, run_id: str, decisions: dict[str, bool] | None = None) -> ReWOOResult:
        """Continue a journaled run (needs a `store`): what it recorded is replayed without
        calling any model or tool again, then it goes on live. `decisions` settle calls in
        doubt (`CallInDoubt`): True runs one again, False records it as not run.

        Raises:
            RunLeased: another process drives the run now.
        """
        opener, make = self._restart(run_id, decisions, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def aresume(self, run_id: str, decisions: dict[str, bool] | None = None) -> ReWOOResult:
        """`resume` on the event loop."""
        opener, make = self._restart(run_id, decisions, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def _start(
        self, task: str, run_id: str | None, observed: bool
    ) -> tuple[session.Opener, session.Make[ReWOOResult]]:
        run_id = run_id or uuid.uuid4().hex[:12]
        machine = self.machine(task, run_id=run_id, observed=observed)
        return session.starting(self._durability, _LOOP, run_id, {"task": task}, machine)

    def status(self, run_id: str) -> ReWOOResult:
        """A journaled run's result as far as its journal goes (needs a `store`), calling
        nothing and taking no lease; a run that stopped part-way has stop reason "running"."""

        def make(meta: dict[str, Any]) -> Machine[ReWOOResult]:
            return self.machine(meta["task"], run_id=run_id)

        return session.status(self._durability, _LOOP, run_id, make, self._host())

    def _restart(
        self, run_id: str, decisions: dict[str, bool] | None, observed: bool
    ) -> tuple[session.Opener, session.Make[ReWOOResult]]:
        def make(meta: dict[str, Any]) -> Machine[ReWOOResult]:
            return self.machine(meta["task"], run_id=run_id, observed=observed)

        return session.resuming(self._durability, _LOOP, run_id, decisions, make)

    def _host(self) -> ToolHost:
        return ToolHost(self.tools, self.executor)

    def close(self) -> None:
        """Nothing to release: the default workers are daemon threads. Kept so a `with`
        block and older code work; a caller's `executor` is never shut down."""

    def __enter__(self) -> ReWOOPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the machine -------------------------------------------------------------------

    def machine(
        self,
        task: str,
        *,
        run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[ReWOOResult]:
        """The run as a step machine (see `agentloops.engine`): plan, work, solve."""
        run = _Run(run_id=run_id or uuid.uuid4().hex[:12])

        def partial(exc: AgentLoopsError) -> ReWOOResult:
            # ToolStepFailed is raised with its result already built.
            stop: ReWOOStopReason = (
                "invalid_plan" if isinstance(exc, PlanValidationError) else "error"
            )
            return exc.result or self._result(run, "", stop, str(exc))

        return lifecycle(
            self._loop(run, task, observed),
            loop=_LOOP,
            run_id=run.run_id,
            observed=observed,
            clock=clock,
            partial=partial,
        )

    def _loop(self, run: _Run, task: str, observed: bool) -> Machine[ReWOOResult]:
        feedback: tuple[str, list[str]] | None = None
        while True:
            plan = yield from self._plan(run, task, observed, feedback)
            done = yield from self._work(run, plan, observed)
            failures = done.failures(plan)
            if failures and self.replan_on_failure and run.replans < self.max_replans:
                yield from self._replanned(run, failures, observed)
                feedback = (plan.model_dump_json(), failures)
                continue
            if done.aborted_by is not None:
                raise self._aborted(run, done.aborted_by)
            break
        response = yield from self._solve(run, task, plan, done.evidence, done.skipped)
        reason: ReWOOStopReason = reply_stop(response)
        detail = "" if reason == "answered" else f"solver stop_reason={response.stop_reason}"
        if reason == "empty":
            detail = "the solver's reply was empty twice"
        return self._result(run, response.message.text, reason, detail)

    # -- planner ----------------------------------------------------------------------

    def _plan(
        self,
        run: _Run,
        task: str,
        observed: bool,
        feedback: tuple[str, list[str]] | None = None,
    ) -> Machine[ReWOOPlan]:
        system = planner_system(self.planner_system, self.tools, self.max_plan_steps)
        while True:
            prompt = planner_prompt(task, *feedback) if feedback else planner_prompt(task)
            try:
                reply = yield from structured_machine(
                    self.planner,
                    ReWOOPlan,
                    prompt,
                    system=system,
                    max_retries=self.max_retries,
                    max_tokens=self.max_tokens,
                    loop=_LOOP,
                    run_id=run.run_id,
                )
            except ModelOutputError as exc:
                run.totals.spend(exc.usage, exc.model_calls)
                raise
            run.totals.spend(reply.usage, reply.model_calls)
            run.plan = plan = reply.value
            problems = rewoo_problems(plan, self.tools, self.max_plan_steps)
            if not problems:
                if observed:
                    yield Emit(PlanMade(loop=_LOOP, run_id=run.run_id, plan=plan))
                return plan
            if run.replans >= self.max_replans:
                raise PlanValidationError(problems, plan=plan)
            yield from self._replanned(run, problems, observed)
            feedback = (reply.raw, problems)

    def _replanned(self, run: _Run, problems: list[str], observed: bool) -> Machine[None]:
        run.replans += 1
        if observed:
            yield Emit(
                Replanned(loop=_LOOP, run_id=run.run_id, attempt=run.replans, problems=problems)
            )

    # -- worker ---------------------------------------------------------------------------

    def _work(self, run: _Run, plan: ReWOOPlan, observed: bool) -> Machine[Work]:
        # Without an executor the machine bounds the parallel steps; an executor has
        # its own bound.
        limit = self.max_workers if self.executor is None else max(len(plan.steps), 1)
        run.evidence, run.skipped = {}, []  # filled as steps finish, for a partial result
        done = yield from work_machine(
            plan,
            self.tools,
            attempt=run.replans,
            limit=limit,
            abort=self.on_tool_error == "abort",
            observed=observed,
            run_id=run.run_id,
            progress=run.evidence,
        )
        run.evidence, run.skipped = done.evidence, done.skipped
        return done

    def _aborted(self, run: _Run, step_id: str) -> ToolStepFailed:
        outcome = run.evidence[step_id]
        total = len(run.plan.steps) if run.plan else len(run.evidence)
        message = (
            f"step {step_id} failed with on_tool_error='abort': {outcome.content:.300}; "
            f"{len(run.evidence)} of {total} steps finished"
        )
        return ToolStepFailed(message, result=self._result(run, "", "tool_failed", message))

    # -- solver -------------------------------------------------------------------------

    def _solve(
        self,
        run: _Run,
        task: str,
        plan: ReWOOPlan,
        evidence: Mapping[str, ToolOutcome],
        skipped: list[str],
    ) -> Machine[ModelResponse]:
        prompt = solver_prompt(task, plan, evidence, set(skipped), self.max_evidence_chars)
        response, calls = yield from text_machine(
            self.solver,
            prompt,
            system=self.solver_system,
            max_tokens=self.max_tokens,
            loop=_LOOP,
            run_id=run.run_id,
            step=run.totals.model_calls,
        )
        run.totals.spend(response.usage, calls)
        return response

    # -- results ------------------------------------------------------------------------

    def _result(self, run: _Run, answer: str, reason: ReWOOStopReason, detail: str) -> ReWOOResult:
        evidence = run.evidence
        if run.plan is not None and len(evidence) < len(run.plan.steps):  # stopped part-way
            order = [s.step_id for s in run.plan.steps]
            evidence = {k: evidence[k] for k in order if k in evidence}
        return ReWOOResult(
            answer=answer,
            plan=run.plan,
            evidence=evidence,
            usage=run.totals.usage,
            model_calls=run.totals.model_calls,
            replans=run.replans,
            run_id=run.run_id,
            stop_reason=reason,
            skipped=run.skipped,
            detail=detail,
        )


def _not_run(outcome: ToolOutcome) -> bool:
    return outcome.content.startswith(NOT_RUN)
