"""Plan-and-Execute: a planner splits the task, each step runs as its own ReAct loop, and a
reporter writes the answer from the step results.

A step starts from its own text and a digest of earlier findings, never from earlier
transcripts, so each step's context stays small. With a checkpointer every finished
step is a resume boundary; the saved state is described in `docs/checkpoints.md`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pydantic

from agentloops._plan_prompts import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    REPLANNER_SYSTEM,
    REPORTER_SYSTEM,
    Plan,
    PlanRevision,
    PlanStep,
    plan_problems,
    planning_prompt,
    replanning_prompt,
    report_prompt,
    step_prompt,
)
from agentloops._plan_state import PlanExecuteResult, RunState, StepRecord
from agentloops.checkpoint import Checkpointer, MemoryCheckpointer
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
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    emit,
)
from agentloops.model import ModelClient, answer_stop
from agentloops.react import ReActLoop, ReActResult
from agentloops.structured import ask_structured, ask_text
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
        planner_system: the planner's system prompt.
        executor_system: the system prompt of each step's ReAct loop.
        reporter_system: the reporter's system prompt.
        replanner_system: the replanner's system prompt.
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
        planner_system: str = PLANNER_SYSTEM,
        executor_system: str = EXECUTOR_SYSTEM,
        reporter_system: str = REPORTER_SYSTEM,
        replanner_system: str = REPLANNER_SYSTEM,
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
            system=executor_system,
            max_steps=max_step_iterations,
            max_tokens=max_tokens,
            approval=approval,
            on_event=on_event,
        )
        self.tools = self.step_loop.tools
        self.max_plan_steps = max_plan_steps
        self.replan = replan
        self.max_replans = max_replans
        self.checkpointer = checkpointer
        self._store: Checkpointer = checkpointer or MemoryCheckpointer()
        self.on_event = on_event
        self.max_retries = max_retries
        self.max_digest_chars = max_digest_chars
        self.max_tokens = max_tokens
        self.planner_system = planner_system
        self.reporter_system = reporter_system
        self.replanner_system = replanner_system

    def run(self, task: str, *, run_id: str | None = None) -> PlanExecuteResult:
        """Plan, run every step, report. Stops early only to wait for an approval.

        Raises:
            ConfigurationError: `run_id` is already saved (resume it instead).
            PlanValidationError: the plan is invalid (and no re-plan is left).
            AgentLoopsError: a model failure; `.result` holds what finished, and with a
                checkpointer `resume(run_id)` continues from the last finished step.
        """
        run_id = run_id or uuid.uuid4().hex[:12]
        if self._store.load(run_id) is not None:
            raise ConfigurationError(f"run {run_id!r} already exists; resume it or pick another")
        state = RunState(run_id=run_id, task=task)
        self._save(state)  # a crash while planning stays resumable
        return self._drive(state)

    def resume(self, run_id: str, decisions: dict[str, bool] | None = None) -> PlanExecuteResult:
        """Continue a saved run at its first unfinished step.

        A finished run's result comes back without calling any model. A run paused for
        approval needs `decisions` (call id to approved, as for `ReActLoop.resume`).

        Raises:
            CheckpointError: no saved run has this id, or its state cannot be read.
            ConfigurationError: decisions for a run that is not waiting for any, missing
                decisions for a paused run, or decisions naming calls that are not pending.
        """
        state = self._load(run_id)
        if state.stop_reason not in ("running", "approval_required"):
            if decisions:
                raise ConfigurationError(f"run {run_id!r} is finished; nothing waits for approval")
            return state.result()
        if state.paused is None:
            if decisions:
                raise ConfigurationError(f"run {run_id!r} is not waiting for approval")
            return self._drive(state)
        paused = state.paused
        pending = sorted(c.id for c in paused.pending_approvals)
        if decisions is None or sorted(decisions) != pending:
            got = sorted(decisions or {})
            raise ConfigurationError(
                f"run {run_id!r} waits for decisions on calls {pending}, got {got}"
            )
        return self._drive(
            state, lambda: self.step_loop.resume(paused, decisions, parent_run_id=run_id)
        )

    def status(self, run_id: str) -> PlanExecuteResult:
        """The saved run as a result, without running anything (e.g. to show pending calls)."""
        return self._load(run_id).result()

    # -- the run -------------------------------------------------------------------

    def _drive(
        self, state: RunState, resume_step: Callable[[], ReActResult] | None = None
    ) -> PlanExecuteResult:
        started = time.perf_counter()
        self._emit(state, RunStarted)
        with self._keep_partial(state, started):
            if not state.plan.steps:
                self._make_plan(state)
            while (i := state.next_step()) is not None:
                step_started = time.perf_counter()
                if resume_step is not None:  # the paused step continues first
                    react, resume_step = resume_step(), None
                elif self._review_due(state, i):
                    self._revise(state, i)
                    continue
                else:
                    react = self._run_step(state, i)
                state.record(i, react)
                self._save(state)
                if state.paused is not None:
                    return self._finish(state, started)
                status = state.steps[i]
                self._emit(
                    state,
                    StepFinished,
                    step_id=str(state.plan.steps[i].step_number),
                    ok=status.status == "done",
                    seconds=time.perf_counter() - step_started,
                    summary=status.result[:200],
                )
            self._report(state)
            self._save(state)
        return self._finish(state, started)

    def _make_plan(self, state: RunState) -> None:
        prompt = planning_prompt(state.task, self.tools, self.max_plan_steps)
        while True:
            plan = self._ask(Plan, prompt, self.planner_system, state)
            problems = plan_problems(plan, max_steps=self.max_plan_steps)
            if not problems:
                break
            if not self.replan or state.replans >= self.max_replans:
                raise PlanValidationError(problems, plan=plan)
            state.replans += 1
            self._emit(state, Replanned, attempt=state.replans, problems=problems)
            prompt = planning_prompt(
                state.task, self.tools, self.max_plan_steps, rejected=(plan, problems)
            )
        state.plan = Plan(steps=sorted(plan.steps, key=lambda s: s.step_number))
        state.steps = [StepRecord() for _ in plan.steps]
        self._save(state)
        self._emit(state, PlanMade, plan=state.plan)

    def _run_step(self, state: RunState, i: int) -> ReActResult:
        step = state.plan.steps[i]
        self._emit(state, StepStarted, step_id=str(step.step_number), description=step.description)
        prompt = step_prompt(state, i, self.max_digest_chars)
        step_run_id = f"{state.run_id}.{step.step_number}"
        return self.step_loop.run(prompt, run_id=step_run_id, parent_run_id=state.run_id)

    def _review_due(self, state: RunState, i: int) -> bool:
        return self.replan and state.replans < self.max_replans and state.reviewed + 1 < i

    def _revise(self, state: RunState, i: int) -> None:
        """Ask the replanner about the steps from `i` on; a valid revision replaces them."""
        prompt = replanning_prompt(state, i, self.max_digest_chars)
        revision = self._ask(PlanRevision, prompt, self.replanner_system, state)
        state.reviewed = i - 1
        if revision.revise:
            notes = state.revise(i, revision, max_steps=self.max_plan_steps)
            self._emit(state, Replanned, attempt=state.replans, problems=notes)
        self._save(state)

    def _report(self, state: RunState) -> None:
        prompt = report_prompt(state)
        response = ask_text(
            self.reporter,
            prompt,
            system=self.reporter_system,
            max_tokens=self.max_tokens,
            on_event=self.on_event,
            loop=_LOOP,
            run_id=state.run_id,
            step=state.model_calls,
        )
        state.spend(response.usage, 1)
        state.answer = response.message.text
        state.stop_reason = answer_stop(response.stop_reason)
        state.detail = f"reporter stop_reason={response.stop_reason}"

    # -- plumbing ------------------------------------------------------------------

    def _ask(self, schema: type[T], prompt: str, system: str, state: RunState) -> T:
        reply = ask_structured(
            self.planner,
            schema,
            prompt,
            system=system,
            max_retries=self.max_retries,
            max_tokens=self.max_tokens,
            on_event=self.on_event,
            loop=_LOOP,
            run_id=state.run_id,
        )
        state.spend(reply.usage, reply.model_calls)
        return reply.value

    @contextmanager
    def _keep_partial(self, state: RunState, started: float) -> Iterator[None]:
        """Attach what finished to a failure, so nothing done is lost with the exception.

        The state stays saved (in memory too, without a checkpointer), so `resume` continues.
        """
        try:
            yield
        except AgentLoopsError as exc:
            if isinstance(exc, ModelOutputError):
                state.spend(exc.usage, exc.model_calls)
            i = state.next_step()
            if isinstance(exc.result, ReActResult) and i is not None:  # the step that failed
                step = state.steps[i]
                step.usage, step.model_calls = exc.result.usage, exc.result.model_calls
                step.tool_calls = exc.result.tool_calls
            detail = f"{type(exc).__name__}: {exc}"
            exc.result = state.result(stop_reason="error", detail=detail)
            self._emit(
                state,
                RunFinished,
                stop_reason="error",
                usage=exc.result.usage,
                model_calls=exc.result.model_calls,
                seconds=time.perf_counter() - started,
            )
            raise

    def _finish(self, state: RunState, started: float) -> PlanExecuteResult:
        result = state.result()
        if self.checkpointer is None and state.paused is None:
            self._store.delete(state.run_id)  # without a checkpointer only pauses are kept
        self._emit(
            state,
            RunFinished,
            stop_reason=result.stop_reason,
            usage=result.usage,
            model_calls=result.model_calls,
            seconds=time.perf_counter() - started,
        )
        return result

    def _load(self, run_id: str) -> RunState:
        return RunState.from_dict(run_id, self._store.load(run_id))

    def _save(self, state: RunState) -> None:
        self._store.save(state.run_id, state.to_dict())

    def _emit(self, state: RunState, kind: type[Event], **fields: Any) -> None:
        emit(self.on_event, kind, loop=_LOOP, run_id=state.run_id, **fields)
