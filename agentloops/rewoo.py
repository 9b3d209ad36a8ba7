"""ReWOO: plan every tool call up front, run them without the model, then solve.

One planner call writes the plan (tool calls with `#E<n>` placeholders for outputs that
do not exist yet), a worker runs it on an executor, each step as soon as its
dependencies are done, and one solver call answers from all the evidence.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloops._rewoo_plan import ReWOOPlan, ReWOOPlanStep, plan_problems, validate_plan
from agentloops._rewoo_prompts import (
    PLANNER_SYSTEM,
    SOLVER_SYSTEM,
    planner_prompt,
    planner_system,
    solver_prompt,
)
from agentloops._rewoo_result import ReWOOResult, ReWOOStopReason
from agentloops._rewoo_worker import Work, work_plan
from agentloops.errors import (
    AgentLoopsError,
    ConfigurationError,
    ModelOutputError,
    PlanValidationError,
    ToolStepFailed,
    check_limits,
)
from agentloops.events import (
    EventSink,
    PlanMade,
    Replanned,
    RunFinished,
    RunStarted,
    emit,
)
from agentloops.model import ModelClient, Usage, answer_stop
from agentloops.structured import ask_structured, ask_text
from agentloops.tools import Tool, ToolOutcome, ToolRegistry

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
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    replans: int = 0
    plan: ReWOOPlan | None = None
    evidence: dict[str, ToolOutcome] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def spend(self, usage: Usage, calls: int) -> None:
        self.usage = self.usage + usage
        self.model_calls += calls


class ReWOOPipeline:
    """Planner, worker, solver: two model calls however many tools run.

    Args:
        planner: the model that writes the plan (through `ask_structured`).
        tools: a `ToolRegistry`, or `Tool`s and typed functions.
        solver: the model that answers from the evidence (default: `planner`).
        executor: where tool steps run; any `concurrent.futures.Executor` (default: a
            thread pool of `max_workers`, made on first use and kept; `close()` or a
            `with` block shuts it down).
        max_workers: size of the default thread pool.
        max_plan_steps: a longer plan is rejected before any tool runs.
        on_tool_error: "evidence" (a failure is evidence marked as an error; steps that
            depend on it are not run) or "abort" (stop dispatching, wait for running
            steps, raise `ToolStepFailed` carrying the evidence so far).
        max_replans: how many times a plan may go back to the planner with its problems.
        replan_on_failure: also re-plan when steps failed (not only for invalid plans).
        max_evidence_chars: longer evidence is cut (head and tail, with a marker) in the
            solver prompt.
        planner_system: the planner's system prompt; the tool list is appended to it.
        solver_system: the solver's system prompt.
        max_retries: structured-output retries for one plan.
        max_tokens: output limit per model call (`None`: the client's default).
        on_event: receives every `Event`.

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
        planner_system: str = PLANNER_SYSTEM,
        solver_system: str = SOLVER_SYSTEM,
        max_retries: int = 2,
        max_tokens: int | None = None,
        on_event: EventSink | None = None,
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
        self.planner_system = planner_system
        self.solver_system = solver_system
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.on_event = on_event
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # -- the three stages, public so each can be used (and tested) alone ------------

    def plan(self, task: str, *, run_id: str = "") -> ReWOOPlan:
        """Ask the planner for a plan and validate it (re-planning up to `max_replans`).

        Raises:
            PlanValidationError: the last plan was still invalid.
            ModelOutputError: the planner's output never matched the plan schema.
        """
        return self._plan(_Run(run_id=run_id), task)

    def work(self, plan: ReWOOPlan, *, run_id: str = "") -> dict[str, ToolOutcome]:
        """Run the plan's tool calls (never the model); evidence in plan order.

        Raises:
            PlanValidationError: the plan is invalid; nothing was dispatched.
            ToolStepFailed: with `on_tool_error="abort"`, a step failed; `.result`
                carries the evidence of the steps that finished.
        """
        run = _Run(run_id=run_id, plan=plan)
        done = self._work(run, plan)
        if done.aborted_by is not None:
            raise self._aborted(run, done.aborted_by)
        return done.evidence

    def solve(
        self, task: str, plan: ReWOOPlan, evidence: Mapping[str, ToolOutcome], *, run_id: str = ""
    ) -> str:
        """One solver call: the answer from the task and every step's evidence."""
        return self._solve(_Run(run_id=run_id), task, plan, evidence)[0]

    def run(self, task: str, *, run_id: str | None = None) -> ReWOOResult:
        """Plan, work, solve; re-plan on problems when allowed.

        Each error carries a `ReWOOResult` as `.result` holding what was done (usage,
        plan, evidence).

        Raises:
            PlanValidationError: the plan was still invalid after the re-plans.
            ToolStepFailed: with `on_tool_error="abort"`, a step failed.
            ModelOutputError: the planner's output never matched the plan schema.
            ModelError: the planner or the solver failed.
        """
        run = _Run(run_id=run_id or uuid.uuid4().hex[:12])
        emit(self.on_event, RunStarted, loop="rewoo", run_id=run.run_id)
        try:
            feedback: tuple[str, list[str]] | None = None
            while True:
                plan = self._plan(run, task, feedback)
                done = self._work(run, plan, validated=True)
                failures = done.failures(plan)
                if failures and self.replan_on_failure and run.replans < self.max_replans:
                    self._replanned(run, failures)
                    feedback = (plan.model_dump_json(), failures)
                    continue
                if done.aborted_by is not None:
                    raise self._aborted(run, done.aborted_by)
                break
            answer, solver_stop = self._solve(run, task, plan, done.evidence)
        except AgentLoopsError as exc:
            if exc.result is None:
                exc.result = self._result(run, "", _stop_reason(exc), str(exc))
            self._finished(run, exc.result.stop_reason)
            raise
        reason: ReWOOStopReason = answer_stop(solver_stop)
        detail = "" if reason == "answered" else f"solver stop_reason={solver_stop}"
        result = self._result(run, answer, reason, detail)
        self._finished(run, reason)
        return result

    # -- planner ----------------------------------------------------------------------

    def _plan(
        self, run: _Run, task: str, feedback: tuple[str, list[str]] | None = None
    ) -> ReWOOPlan:
        system = planner_system(self.planner_system, self.tools, self.max_plan_steps)
        while True:
            prompt = planner_prompt(task, *feedback) if feedback else planner_prompt(task)
            try:
                reply = ask_structured(
                    self.planner,
                    ReWOOPlan,
                    prompt,
                    system=system,
                    max_retries=self.max_retries,
                    max_tokens=self.max_tokens,
                    on_event=self.on_event,
                    loop="rewoo",
                    run_id=run.run_id,
                )
            except ModelOutputError as exc:
                run.spend(exc.usage, exc.model_calls)
                raise
            run.spend(reply.usage, reply.model_calls)
            run.plan = plan = reply.value
            problems = plan_problems(plan, self.tools, self.max_plan_steps)
            if not problems:
                emit(self.on_event, PlanMade, loop="rewoo", run_id=run.run_id, plan=plan)
                return plan
            if run.replans >= self.max_replans:
                raise PlanValidationError(problems, plan=plan)
            self._replanned(run, problems)
            feedback = (reply.raw, problems)

    def _replanned(self, run: _Run, problems: list[str]) -> None:
        run.replans += 1
        emit(
            self.on_event,
            Replanned,
            loop="rewoo",
            run_id=run.run_id,
            attempt=run.replans,
            problems=problems,
        )

    # -- worker ---------------------------------------------------------------------------

    def _work(self, run: _Run, plan: ReWOOPlan, *, validated: bool = False) -> Work:
        if not validated:
            validate_plan(plan, self.tools, max_steps=self.max_plan_steps)
        done = work_plan(
            plan,
            self.tools,
            executor=self.executor or self._thread_pool(),
            abort=self.on_tool_error == "abort",
            on_event=self.on_event,
            run_id=run.run_id,
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

    def _thread_pool(self) -> ThreadPoolExecutor:
        # One pool per pipeline, made on first use: starting threads for every run would
        # cost more than scheduling a whole small plan.
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.max_workers, thread_name_prefix="agentloops-rewoo"
                )
            return self._pool

    def close(self) -> None:
        """Shut down the default thread pool (a caller's `executor` is left alone).
        A later run starts a new one."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def __getstate__(self) -> dict[str, Any]:
        # A pipeline sent to another process (a batch run on Dask) starts its own pool there.
        state = self.__dict__.copy()
        state["_pool"] = None
        del state["_pool_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool_lock = threading.Lock()

    def __enter__(self) -> ReWOOPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- solver -------------------------------------------------------------------------

    def _solve(
        self, run: _Run, task: str, plan: ReWOOPlan, evidence: Mapping[str, ToolOutcome]
    ) -> tuple[str, str]:
        prompt = solver_prompt(task, plan, evidence, self.max_evidence_chars)
        response = ask_text(
            self.solver,
            prompt,
            system=self.solver_system,
            max_tokens=self.max_tokens,
            on_event=self.on_event,
            loop="rewoo",
            run_id=run.run_id,
            step=run.model_calls,
        )
        run.spend(response.usage, 1)
        return response.message.text, response.stop_reason

    # -- results and events -------------------------------------------------------------

    def _result(self, run: _Run, answer: str, reason: ReWOOStopReason, detail: str) -> ReWOOResult:
        return ReWOOResult(
            answer=answer,
            plan=run.plan,
            evidence=run.evidence,
            usage=run.usage,
            model_calls=run.model_calls,
            replans=run.replans,
            run_id=run.run_id,
            stop_reason=reason,
            skipped=run.skipped,
            detail=detail,
        )

    def _finished(self, run: _Run, reason: str) -> None:
        emit(
            self.on_event,
            RunFinished,
            loop="rewoo",
            run_id=run.run_id,
            stop_reason=reason,
            usage=run.usage,
            model_calls=run.model_calls,
            seconds=time.perf_counter() - run.started,
        )


def _stop_reason(exc: AgentLoopsError) -> ReWOOStopReason:
    # ToolStepFailed is raised with its result already built.
    return "invalid_plan" if isinstance(exc, PlanValidationError) else "error"
