"""What a Plan-and-Execute run returns (`PlanExecuteResult`), and its saved state (`RunState`).

A public module: pickled and stored results name it; the plan schema is in `schema`.

`RunState` is what a checkpointer stores: enough to continue at the first unfinished
step in another process, and nothing a finished step would need again (no transcripts).
One pydantic model (`SavedRun`) both writes that state and checks it on the way back in,
so a saved state that was edited or damaged is refused, naming the bad field.

Rule: records and their JSON; no machine, no driver.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import pydantic

from agentloops._validation import field_errors
from agentloops.errors import CheckpointError, TranscriptError, raise_for_stop
from agentloops.messages import ToolCall, validate_transcript
from agentloops.plan_execute.schema import Plan, PlanRevision, PlanStep, plan_problems
from agentloops.react import ReActResult
from agentloops.usage import Usage

STATE_FORMAT = 1
"""The version of the saved run state; a newer one is refused, never misread."""

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
    "budget",
    "deadline",
    "error",
]


@dataclass(frozen=True, kw_only=True)
class PlanExecuteResult:
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
    """The cost per role: "planner", "solver", "reporter"..., and "react" for ReAct steps."""

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


class SavedRun(pydantic.BaseModel):
    """The checkpoint form of a `RunState`: what `to_dict` writes and `from_dict` reads."""

    model_config = pydantic.ConfigDict(strict=True, extra="forbid", defer_build=True)

    format: int
    kind: Literal["plan_execute"]
    run_id: str
    task: str
    plan: Plan
    steps: list[StepRecord]
    usage: Usage
    model_calls: int
    replans: int
    reviewed: int
    paused: dict[str, Any] | None
    """The paused step's `ReActResult.to_state()`, checked with its transcript on load."""
    answer: str
    stop_reason: PlanStopReason
    detail: str


@dataclass(kw_only=True)
class RunState:
    """A run in progress or finished; `to_dict`/`from_dict` are its checkpoint form."""

    run_id: str
    task: str
    plan: Plan = field(default_factory=lambda: Plan(steps=[]))
    steps: list[StepRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Planner, replanner and reporter calls (the steps keep their own)."""
    model_calls: int = 0
    replans: int = 0
    reviewed: int = -1
    """Index of the last step after which the replanner was asked."""
    paused: ReActResult | None = None
    """The paused step's ReAct result, while it waits for approval (saved as its state)."""
    answer: str = ""
    stop_reason: PlanStopReason = "running"
    detail: str = ""

    def next_step(self) -> int | None:
        """Index of the first step not finished (pending or paused), or None."""
        for i, s in enumerate(self.steps):
            if s.status in ("pending", "paused"):
                return i
        return None

    def spend(self, usage: Usage, model_calls: int) -> None:
        self.usage, self.model_calls = self.usage + usage, self.model_calls + model_calls

    def record(self, i: int, react: ReActResult) -> None:
        """Take step `i`'s ReAct result: paused, done, or incomplete (and say why)."""
        step = self.steps[i]
        step.usage, step.model_calls, step.tool_calls = (
            react.usage,
            react.model_calls,
            react.tool_calls,
        )
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
            usage=sum((s.usage for s in self.steps), self.usage),
            model_calls=self.model_calls + sum(s.model_calls for s in self.steps),
            run_id=self.run_id,
            stop_reason=stop,
            step_status=[s.status for s in self.steps],
            tool_calls=sum(s.tool_calls for s in self.steps),
            replans=self.replans,
            pending_approvals=paused.pending_approvals if paused is not None else [],
            detail=self.detail if detail is None else detail,
        )

    def to_dict(self) -> dict[str, Any]:
        saved = SavedRun(
            format=STATE_FORMAT,
            kind="plan_execute",
            run_id=self.run_id,
            task=self.task,
            plan=self.plan,
            steps=self.steps,
            usage=self.usage,
            model_calls=self.model_calls,
            replans=self.replans,
            reviewed=self.reviewed,
            paused=self.paused.to_state() if self.paused is not None else None,
            answer=self.answer,
            stop_reason=self.stop_reason,
            detail=self.detail,
        )
        return saved.model_dump(mode="json")

    @classmethod
    def from_dict(cls, run_id: str, data: dict[str, Any] | None) -> RunState:
        """Rebuild a saved state, checked field by field.

        Raises:
            CheckpointError: no state (an unknown run), a state from a newer agentloops,
                or one that is not a Plan-and-Execute state or is malformed (naming each
                bad field, e.g. `steps.1.status`).
        """
        if data is None:
            raise CheckpointError(f"no saved run with id {run_id!r}", run_id=run_id)
        version = data.get("format") if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("kind") != "plan_execute"
            or not isinstance(version, int)
        ):
            raise CheckpointError(
                f"run {run_id!r}: the saved state is not a Plan-and-Execute run", run_id=run_id
            )
        if version > STATE_FORMAT:
            raise CheckpointError(
                f"run {run_id!r}: state format {version} is newer than this agentloops "
                f"supports ({STATE_FORMAT}); upgrade agentloops to resume it",
                run_id=run_id,
            )
        try:
            # Through JSON: strict mode there still reads objects into dataclasses and models.
            saved = SavedRun.model_validate_json(json.dumps(data))
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            errors = exc if isinstance(exc, pydantic.ValidationError) else None
            why = "; ".join(field_errors(errors, root="state")) if errors else str(exc)
            raise CheckpointError(
                f"run {run_id!r}: the saved state is malformed: {why}", run_id=run_id
            ) from exc
        state = cls(
            run_id=saved.run_id,
            task=saved.task,
            plan=saved.plan,
            steps=saved.steps,
            usage=saved.usage,
            model_calls=saved.model_calls,
            replans=saved.replans,
            reviewed=saved.reviewed,
            paused=None,  # checked below, before anything could send it
            answer=saved.answer,
            stop_reason=saved.stop_reason,
            detail=saved.detail,
        )
        if len(state.steps) != len(state.plan.steps):
            raise CheckpointError(
                f"run {run_id!r}: the saved state is malformed (steps do not match the plan)",
                run_id=run_id,
            )
        if saved.paused is not None:  # never send a broken transcript to the provider
            try:
                state.paused = ReActResult.from_state(saved.paused)
                validate_transcript(state.paused.messages, allow_pending=True)
                if not state.paused.pending_approvals:
                    raise TranscriptError("its last turn does not hold the pending calls")
            except (KeyError, TypeError, ValueError, IndexError, TranscriptError) as exc:
                raise CheckpointError(
                    f"run {run_id!r}: the paused step's transcript is malformed ({exc})",
                    run_id=run_id,
                ) from exc
        return state


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
        parts.append("Last observations: " + " | ".join(seen)[:1000])
    return " ".join(parts)
