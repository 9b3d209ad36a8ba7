"""Plan-and-Execute: a planner splits the task, each step runs as its own ReAct loop, and a
reporter writes the answer from the step results.

A step starts from its own text and a digest of earlier findings, never from earlier
transcripts, so each step's context stays small. With a checkpointer every finished
step is a resume boundary; the saved state is described in `docs/checkpoints.md`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, TypeVar

import pydantic

from agentloops._plan_prompts import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    REPLANNER_SYSTEM,
    REPORTER_SYSTEM,
    planning_prompt,
    replanning_prompt,
    report_prompt,
    step_prompt,
)
from agentloops._plan_schema import Plan, PlanRevision, PlanStep, plan_problems
from agentloops._plan_state import PlanExecuteResult, PlanStopReason, RunState, StepRecord
from agentloops.checkpoint import Checkpointer, MemoryCheckpointer
from agentloops.engine import session
from agentloops.engine.effects import Emit, Machine, Save
from agentloops.engine.host import ToolHost
from agentloops.engine.runs import Clock, lifecycle
from agentloops.errors import (
    AgentLoopsError,
    ConfigurationError,
    ModelOutputError,
    PlanValidationError,
    check_limits,
)
from agentloops.events import (
    Event,
    EventSink,
    PlanMade,
    Replanned,
    StepFinished,
    StepStarted,
)
from agentloops.journal import RunStore
from agentloops.model import ModelClient
from agentloops.react import ReActLoop, ReActResult
from agentloops.structured import reply_stop, structured_machine, text_machine
from agentloops.tools import ApprovalPolicy, Tool, ToolRegistry

_LOOP = "plan_execute"
T = TypeVar("T", bound=pydantic.BaseModel)

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


class PlanAndExecute:
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
        checkpointer: saves the run after the plan and after every finished step, so
            `resume(run_id)` continues it, in this process or another. Without one,
            runs are kept in memory until they finish: a paused or failed run can
            still be resumed in this process.
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
            and `resume(run_id)` replays it in any process (docs/durability.md); takes the
            place of a checkpointer.
        lease_ttl: seconds a run's lease lasts without renewal (renewed while it runs).

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
        checkpointer: Checkpointer | None = None,
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
    ):
        check_limits(
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
        self.tools = self.step_loop.tools
        self.max_plan_steps = max_plan_steps
        self.replan = replan
        self.max_replans = max_replans
        if store is not None and checkpointer is not None:
            raise ConfigurationError("give a store or a checkpointer, not both: a store journals")
        self.checkpointer = checkpointer
        self._store: Checkpointer = checkpointer or MemoryCheckpointer()
        self.store = store
        self._durability = session.Durability(store, lease_ttl) if store is not None else None
        self.on_event = on_event
        self.max_retries = max_retries
        self.max_digest_chars = max_digest_chars
        self.max_tokens = max_tokens
        self.planner_system = PLANNER_SYSTEM if planner_system is None else planner_system
        self.reporter_system = REPORTER_SYSTEM if reporter_system is None else reporter_system
        self.replanner_system = REPLANNER_SYSTEM if replanner_system is None else replanner_system

    # -- drivers -------------------------------------------------------------------

    def run(self, task: str, *, run_id: str | None = None) -> PlanExecuteResult:
        """Plan, run every step, report. Stops early only to wait for an approval.

        Raises:
            ConfigurationError: `run_id` is already saved (resume it instead).
            RunExists: with a `store`, `run_id` is taken.
            PlanValidationError: the plan is invalid (and no re-plan is left).
            AgentLoopsError: a model failure; `.result` holds what finished, and with a
                checkpointer or a store `resume(run_id)` continues from there.
        """
        opener, make = self._start(task, run_id, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def arun(self, task: str, *, run_id: str | None = None) -> PlanExecuteResult:
        """`run` on the event loop."""
        opener, make = self._start(task, run_id, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def stream(
        self, task: str, *, run_id: str | None = None
    ) -> Iterator[Event | PlanExecuteResult]:
        """Every event of the run as it happens (the steps' too, deltas included), then
        the result."""
        opener, make = self._start(task, run_id, True)
        return session.stream(opener, make, self._host(), self.on_event)

    def astream(
        self, task: str, *, run_id: str | None = None
    ) -> AsyncIterator[Event | PlanExecuteResult]:
        """`stream` on the event loop."""
        opener, make = self._start(task, run_id, True)
        return session.astream(opener, make, self._host(), self.on_event)

    def resume(self, run_id: str, decisions: dict[str, bool] | None = None) -> PlanExecuteResult:
        """Continue a saved run at its first unfinished step.

        A finished run's result comes back without calling any model. A run paused for
        approval needs `decisions` (call id to approved, as for `ReActLoop.resume`). With
        a `store`, the journal is replayed (nothing on record runs again) under the run's
        lease, and the decisions are recorded under it first: exactly once across
        processes.

        Raises:
            CheckpointError: no saved run has this id, or its state cannot be read.
            ConfigurationError: decisions for a run that is not waiting for any, missing
                decisions for a paused run, or decisions naming calls that are not pending.
            RunLeased: with a store, another process drives the run now.
        """
        opener, make = self._restart(run_id, decisions, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def aresume(
        self, run_id: str, decisions: dict[str, bool] | None = None
    ) -> PlanExecuteResult:
        """`resume` on the event loop."""
        opener, make = self._restart(run_id, decisions, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def _start(
        self, task: str, run_id: str | None, observed: bool
    ) -> tuple[session.Opener, session.Make[PlanExecuteResult]]:
        run_id = run_id or uuid.uuid4().hex[:12]
        machine = self.machine(task, run_id=run_id, observed=observed)
        return session.starting(self._durability, _LOOP, run_id, {"task": task}, machine)

    def _restart(
        self, run_id: str, decisions: dict[str, bool] | None, observed: bool
    ) -> tuple[session.Opener, session.Make[PlanExecuteResult]]:
        if self._durability is None:  # the checkpointer's way
            machine = self.resume_machine(run_id, decisions, observed=observed)
            return session.plain, lambda _: machine

        def make(meta: dict[str, Any]) -> Machine[PlanExecuteResult]:
            return self._replayed(meta["task"], run_id, observed)

        return session.resuming(self._durability, _LOOP, run_id, decisions, make)

    def _replayed(self, task: str, run_id: str, observed: bool) -> Machine[PlanExecuteResult]:
        state = RunState(run_id=run_id, task=task)
        return self._lifecycle(
            state,
            self._drive(state, None, observed, time.perf_counter),
            observed,
            time.perf_counter,
        )

    def status(self, run_id: str) -> PlanExecuteResult:
        """The saved run as a result, without running anything (e.g. to show pending calls).

        With a store it is read from the journal, calling nothing and taking no lease: a
        run that stopped part-way comes back with stop reason "running"."""
        if self._durability is None:
            return self._load(run_id).result()

        def make(meta: dict[str, Any]) -> Machine[PlanExecuteResult]:
            return self._replayed(meta["task"], run_id, False)

        return session.status(self._durability, _LOOP, run_id, make, self._host())

    def _host(self) -> ToolHost:
        return ToolHost(self.tools)

    # -- the machine ----------------------------------------------------------------

    def machine(
        self,
        task: str,
        *,
        run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[PlanExecuteResult]:
        """The run as a step machine (see `agentloops.engine`). The run id is checked
        against the checkpointer when this is called."""
        run_id = run_id or uuid.uuid4().hex[:12]
        if self.store is None and self._store.load(run_id) is not None:
            raise ConfigurationError(f"run {run_id!r} already exists; resume it or pick another")
        state = RunState(run_id=run_id, task=task)

        def body() -> Machine[PlanExecuteResult]:
            yield self._save(state)  # a crash while planning stays resumable
            return (yield from self._drive(state, None, observed, clock))

        return self._lifecycle(state, body(), observed, clock)

    def resume_machine(
        self,
        run_id: str,
        decisions: dict[str, bool] | None = None,
        *,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[PlanExecuteResult]:
        """`resume` as a step machine; the saved state is loaded and checked when this is
        called."""
        state = self._load(run_id)
        if state.stop_reason not in ("running", "approval_required"):
            if decisions:
                raise ConfigurationError(f"run {run_id!r} is finished; nothing waits for approval")
            return _done(state.result())
        resume_step = None
        if state.paused is None:
            if decisions:
                raise ConfigurationError(f"run {run_id!r} is not waiting for approval")
        else:
            pending = sorted(c.id for c in state.paused.pending_approvals)
            if decisions is None or sorted(decisions) != pending:
                got = sorted(decisions or {})
                raise ConfigurationError(
                    f"run {run_id!r} waits for decisions on calls {pending}, got {got}"
                )
            resume_step = self.step_loop.resume_machine(
                state.paused, decisions, parent_run_id=run_id, observed=observed, clock=clock
            )
        return self._lifecycle(
            state, self._drive(state, resume_step, observed, clock), observed, clock
        )

    def _drive(
        self,
        state: RunState,
        resume_step: Machine[ReActResult] | None,
        observed: bool,
        clock: Clock,
    ) -> Machine[PlanExecuteResult]:
        if not state.plan.steps:
            yield from self._make_plan(state, observed)
        while (i := state.next_step()) is not None:
            step_started = clock()
            if resume_step is not None:  # the paused step continues first
                react = yield from resume_step
                resume_step = None
            elif self._review_due(state, i):
                yield from self._revise(state, i, observed)
                continue
            else:
                react = yield from self._run_step(state, i, observed, clock)
            state.record(i, react)
            yield self._save(state)
            if state.paused is not None:
                return (yield from self._finish(state))
            if observed:
                record = state.steps[i]
                yield self._event(
                    state,
                    StepFinished,
                    step_id=str(state.plan.steps[i].step_number),
                    ok=record.status == "done",
                    seconds=clock() - step_started,
                    summary=record.result[:200],
                )
        yield from self._report(state)
        yield self._save(state)
        return (yield from self._finish(state))

    def _make_plan(self, state: RunState, observed: bool) -> Machine[None]:
        prompt = planning_prompt(state.task, self.tools, self.max_plan_steps)
        while True:
            plan = yield from self._ask(Plan, prompt, self.planner_system, state)
            problems = plan_problems(plan, max_steps=self.max_plan_steps)
            if not problems:
                break
            if not self.replan or state.replans >= self.max_replans:
                raise PlanValidationError(problems, plan=plan)
            state.replans += 1
            if observed:
                yield self._event(state, Replanned, attempt=state.replans, problems=problems)
            prompt = planning_prompt(
                state.task, self.tools, self.max_plan_steps, rejected=(plan, problems)
            )
        state.plan = Plan(steps=sorted(plan.steps, key=lambda s: s.step_number))
        state.steps = [StepRecord() for _ in plan.steps]
        yield self._save(state)
        if observed:
            yield self._event(state, PlanMade, plan=state.plan)

    def _run_step(
        self, state: RunState, i: int, observed: bool, clock: Clock
    ) -> Machine[ReActResult]:
        step = state.plan.steps[i]
        if observed:
            yield self._event(
                state, StepStarted, step_id=str(step.step_number), description=step.description
            )
        prompt = step_prompt(state, i, self.max_digest_chars)
        return (
            yield from self.step_loop.machine(
                prompt,
                run_id=f"{state.run_id}.{step.step_number}",
                parent_run_id=state.run_id,
                observed=observed,
                clock=clock,
            )
        )

    def _review_due(self, state: RunState, i: int) -> bool:
        return self.replan and state.replans < self.max_replans and state.reviewed + 1 < i

    def _revise(self, state: RunState, i: int, observed: bool) -> Machine[None]:
        """Ask the replanner about the steps from `i` on; a valid revision replaces them."""
        prompt = replanning_prompt(state, i, self.max_digest_chars)
        revision = yield from self._ask(PlanRevision, prompt, self.replanner_system, state)
        state.reviewed = i - 1
        if revision.revise:
            notes = state.revise(i, revision, max_steps=self.max_plan_steps)
            if observed:
                yield self._event(state, Replanned, attempt=state.replans, problems=notes)
        yield self._save(state)

    def _report(self, state: RunState) -> Machine[None]:
        response, calls = yield from text_machine(
            self.reporter,
            report_prompt(state),
            system=self.reporter_system,
            max_tokens=self.max_tokens,
            loop=_LOOP,
            run_id=state.run_id,
            step=state.model_calls,
        )
        state.spend(response.usage, calls)
        state.answer = response.message.text
        state.stop_reason = reply_stop(response)
        state.detail = f"reporter stop_reason={response.stop_reason}"
        if state.stop_reason == "empty":
            state.detail = "the reporter's reply was empty twice"

    def _finish(self, state: RunState) -> Machine[PlanExecuteResult]:
        if self.checkpointer is None and state.paused is None:
            yield Save(self._store, state.run_id, None)  # without a checkpointer only pauses stay
        return state.result()

    # -- plumbing ------------------------------------------------------------------

    def _ask(self, schema: type[T], prompt: str, system: str, state: RunState) -> Machine[T]:
        reply = yield from structured_machine(
            self.planner,
            schema,
            prompt,
            system=system,
            max_retries=self.max_retries,
            max_tokens=self.max_tokens,
            loop=_LOOP,
            run_id=state.run_id,
        )
        state.spend(reply.usage, reply.model_calls)
        return reply.value

    def _lifecycle(
        self, state: RunState, body: Machine[PlanExecuteResult], observed: bool, clock: Clock
    ) -> Machine[PlanExecuteResult]:
        def partial(exc: AgentLoopsError) -> PlanExecuteResult:
            """What finished, attached to a failure; the state stays saved (in memory too,
            without a checkpointer), so `resume` continues."""
            if isinstance(exc, ModelOutputError):
                state.spend(exc.usage, exc.model_calls)
            i = state.next_step()
            if isinstance(exc.result, ReActResult) and i is not None:  # the step that failed
                step = state.steps[i]
                step.usage, step.model_calls = exc.result.usage, exc.result.model_calls
                step.tool_calls = exc.result.tool_calls
            stop: PlanStopReason = (
                "invalid_plan" if isinstance(exc, PlanValidationError) else "error"
            )
            return state.result(stop_reason=stop, detail=f"{type(exc).__name__}: {exc}")

        return lifecycle(
            body, loop=_LOOP, run_id=state.run_id, observed=observed, clock=clock, partial=partial
        )

    def _load(self, run_id: str) -> RunState:
        return RunState.from_dict(run_id, self._store.load(run_id))

    def _save(self, state: RunState) -> Save:
        return Save(self._store, state.run_id, state.to_dict())

    def _event(self, state: RunState, kind: type[Event], **fields: Any) -> Emit:
        return Emit(kind(loop=_LOOP, run_id=state.run_id, **fields))


def _done(result: PlanExecuteResult) -> Machine[PlanExecuteResult]:
    """A machine with nothing to do: a finished run's saved result."""
    return result
    yield  # pragma: no cover  (makes this a generator)
