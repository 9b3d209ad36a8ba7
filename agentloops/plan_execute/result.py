"""What a Plan-and-Execute run returns (`PlanExecuteResult`), and the run's state as its
machine keeps it (`RunState`).

A public module: pickled and stored results name it; the plan schema is in `schema`.
Nothing here is stored: a run's journal holds its outcomes, and replaying them rebuilds
its `RunState`.

Rule: records only; no machine, no driver, no store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from agentloops._text import cut
from agentloops.engine.runs import Totals
from agentloops.errors import raise_for_stop
from agentloops.events import Record
from agentloops.messages import SubRun, ToolCall
from agentloops.plan_execute.schema import Plan, PlanRevision, PlanStep, plan_problems
from agentloops.react import ReActResult
from agentloops.usage import Usage

StepStatus = Literal["pending", "done", "incomplete", "paused"]
PlanStopReason = Literal[
    "running",
    "answered",
    "approval_required",
    "refused",
    "max_tokens",
    "context_window",
    "empty",
    "invalid_plan",
    "invalid_output",
    "budget",
    "deadline",
    "guardrail",
    "error",
]


@dataclass(frozen=True, kw_only=True)
class PlanExecuteResult(Record):
    """What a Plan-and-Execute run produced, or how far a paused or failed run got."""

    answer: str
    plan: Plan
    step_results: list[str]
    """One per plan step, in plan order ("" for a step that has not finished)."""
    usage: Usage
    """Every model call of the run: planner, steps, replanner, reporter."""
    model_calls: int
    run_id: str
    stop_reason: PlanStopReason
    """"answered", "approval_required", "refused", "max_tokens", "context_window",
    "empty" (the reporter's reply), "budget" (`max_cost` spent), "deadline" (`deadline`
    passed), "invalid_plan" / "error" (on an exception's `.result`), or "running" (from
    `status` of a run that has not finished)."""
    step_status: list[StepStatus] = field(default_factory=list)
    """Per step: "pending", "done", "incomplete" (stopped short, e.g. at its limit), "paused"."""
    tool_calls: int = 0
    replans: int = 0
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """The paused step's calls waiting for a decision (`stop_reason="approval_required"`)."""
    detail: str = ""
    cost: Decimal | None = None
    """What the run's model calls cost, when the loop knows its models' prices (`price=`,
    a priced client, or the packaged table); `None` otherwise."""
    cost_by_role: dict[str, Decimal] = field(default_factory=dict)
    """The cost per role: "planner", "replanner", "executor" (the steps' calls), "reporter"."""
    output: Any = None
    """With `output_type`: the reporter's validated answer (`None` when the run stopped
    short); `answer` is then its JSON."""
    pending_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """For each pending call (by the key a decision names it with): the run ids from this
    run down to the run that asks (this run, its step's ReAct run, and any sub-runs)."""
    subruns: list[SubRun] = field(default_factory=list)
    """The runs its steps' agent tools made (their usage and calls are in this run's)."""

    def raise_for_stop(self) -> None:
        """Raise the matching `RunError` (with this result) unless the run answered."""
        raise_for_stop(self)


@dataclass(kw_only=True)
class StepRecord:
    """How one step of the plan went (parallel to `plan.steps`)."""

    status: StepStatus = "pending"
    result: str = ""
    usage: Usage = field(default_factory=Usage)
    """Everything this step's ReAct loop spent (replaced, not added, when a pause resumes)."""
    model_calls: int = 0
    tool_calls: int = 0
    subruns: list[SubRun] = field(default_factory=list)
    """The runs its agent tools made."""


@dataclass(kw_only=True)
class RunState:
    """A run in progress or finished, as its machine keeps it."""

    run_id: str
    task: str
    plan: Plan = field(default_factory=lambda: Plan(steps=[]))
    steps: list[StepRecord] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    """Planner, replanner and reporter calls (the steps keep their own)."""
    replans: int = 0
    reviewed: int = -1
    """Index of the last step after which the replanner was asked."""
    paused: ReActResult | None = None
    """The paused step's ReAct result, while it waits for approval."""
    answer: str = ""
    stop_reason: PlanStopReason = "running"
    detail: str = ""
    output: Any = None
    """A typed run's output (rebuilt from the journal on resume, as the rest of the state)."""

    def next_step(self) -> int | None:
        """Index of the first step not finished (pending or paused), or None."""
        for i, s in enumerate(self.steps):
            if s.status in ("pending", "paused"):
                return i
        return None

    def record(self, i: int, react: ReActResult) -> None:
        """Take step `i`'s ReAct result: paused, done, or incomplete (and say why)."""
        step = self.steps[i]
        step.usage, step.model_calls, step.tool_calls = (
            react.usage,
            react.model_calls,
            react.tool_calls,
        )
        step.subruns = list(react.subruns)
        if react.stop_reason == "approval_required":
            step.status, self.paused = "paused", react
            self.stop_reason, self.detail = "approval_required", react.detail
            return
        self.paused, self.stop_reason, self.detail = None, "running", ""
        step.status = "done" if react.stop_reason == "answered" else "incomplete"
        step.result = _step_text(react)

    def revise(self, i: int, revision: PlanRevision, *, max_steps: int) -> list[str]:
        """Replace the steps from `i` on, unless the plan would break its rules.

        Returns what to report: the revision's reason, or why it was rejected.
        """
        self.replans += 1
        done = self.plan.steps[:i]
        first = max(s.step_number for s in done) + 1
        new = [
            PlanStep(step_number=first + k, description=s.description, tool_hint=s.tool_hint)
            for k, s in enumerate(revision.steps)
        ]
        # An empty revision is allowed: the findings already answer the task.
        problems = plan_problems(Plan(steps=done + new), max_steps=max_steps)
        if problems:
            return [f"revision rejected, the plan is kept: {p}" for p in problems]
        self.plan = Plan(steps=done + new)
        self.steps = self.steps[:i] + [StepRecord() for _ in new]
        return [revision.reason or "the remaining steps were revised"]

    def result(
        self, *, stop_reason: PlanStopReason | None = None, detail: str | None = None
    ) -> PlanExecuteResult:
        paused = self.paused
        stop = stop_reason or self.stop_reason
        return PlanExecuteResult(
            answer=self.answer,
            plan=self.plan,
            step_results=[s.result for s in self.steps],
            usage=sum((s.usage for s in self.steps), self.totals.usage),
            model_calls=self.totals.model_calls + sum(s.model_calls for s in self.steps),
            run_id=self.run_id,
            stop_reason=stop,
            step_status=[s.status for s in self.steps],
            tool_calls=sum(s.tool_calls for s in self.steps),
            replans=self.replans,
            pending_approvals=paused.pending_approvals if paused is not None else [],
            detail=self.detail if detail is None else detail,
            output=self.output,
            pending_paths={}
            if paused is None
            else {k: (self.run_id, *v) for k, v in paused.pending_paths.items()},
            subruns=[run for s in self.steps for run in s.subruns],
        )


def _step_text(react: ReActResult) -> str:
    """The step's finding; a step that stopped short says so, with its last observations."""
    if react.stop_reason == "answered":
        return react.answer.strip() or "(the step gave no answer)"
    why = react.detail or react.stop_reason
    if react.stop_reason == "max_steps":  # in this loop's terms, not the inner ReAct's
        why = f"max_step_iterations={react.steps} reached before the step was done"
    parts = [f"[incomplete: {why}]"]
    if react.answer.strip():
        parts.append(react.answer.strip())
    last = react.messages[-1]
    seen = [r.content for r in last.tool_results] if last.role == "user" else []
    if seen:
        parts.append("Last observations: " + cut(" | ".join(seen), 1000))
    return " ".join(parts)
