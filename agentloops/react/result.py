"""The record a ReAct run returns, and its JSON state for checkpoints.

A public module: pickled and stored results name it (`agentloops.react.result.ReActResult`).
Rule: a record only; it knows no machine and no driver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

import pydantic
from pydantic_core import to_jsonable_python

from agentloops.errors import raise_for_stop
from agentloops.events import Record
from agentloops.messages import (
    Message,
    SubRun,
    ToolCall,
    ToolResult,
    block_from_dict,
    block_to_dict,
    message_from_dict,
    message_to_dict,
    subrun_from_dict,
    subrun_to_dict,
)
from agentloops.usage import Usage

ReActStopReason = Literal[
    "answered",
    "max_steps",
    "budget",
    "deadline",
    "stalled",
    "approval_required",
    "refused",
    "max_tokens",
    "context_window",
    "empty",
    "max_tool_calls",
    "invalid_output",
    "handoff_cycle",
    "guardrail",
    "error",
    "running",
]


@dataclass(frozen=True, kw_only=True)
class ReActResult(Record):
    """What a ReAct run produced. Nothing is lost when it stops short of an answer."""

    answer: str
    """The last assistant text ("" when the run never answered)."""
    stop_reason: ReActStopReason
    messages: list[Message]
    """The whole transcript, valid to send again (a paused run ends on its pending calls)."""
    usage: Usage
    model_calls: int
    tool_calls: int
    """Tool calls run (denied or cut calls are not counted)."""
    steps: int
    run_id: str
    detail: str = ""
    """Why the run stopped, quoting the limit and the observed value."""
    pending_approvals: list[ToolCall] = field(default_factory=list)
    """Calls waiting for a human decision (`stop_reason="approval_required"`): this run's
    own, and those of its paused sub-runs (agent tools, handoffs)."""
    held_results: list[ToolResult] = field(default_factory=list)
    """Results of the paused turn's other calls, already run or denied."""
    pending_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """For each pending call, by the key a decision names it with (its id; `RUN_ID:CALL_ID`
    for an id two runs below share): the run ids from this run down to the run that asks
    (`(run_id,)` for this run's own calls)."""
    subruns: list[SubRun] = field(default_factory=list)
    """The runs its agent tools and handoffs made, in the order they ended (a paused one
    with stop reason "approval_required"); their usage and calls are in this run's."""
    answered_by: str = ""
    """The name of the loop that answered: a handoff's target (the last of a chain), or
    this loop's own `name`."""
    cost: Decimal | None = None
    """What the run's model calls cost, when the loop knows its models' prices (`price=`,
    a priced client, or the packaged table); `None` otherwise."""
    cost_by_role: dict[str, Decimal] = field(default_factory=dict)
    """The cost per role: "planner", "solver", "reporter"..., and "react" for ReAct steps."""
    output: Any = None
    """With `output_type`: the validated final answer (`None` when the run stopped short);
    `answer` is then its JSON."""

    def raise_for_stop(self) -> None:
        """Raise the matching `RunError` (with this result) unless the run answered."""
        raise_for_stop(self)

    def to_state(self) -> dict[str, Any]:
        """A JSON-ready dict; `ReActResult.from_state` rebuilds it (e.g. in another process).
        A typed run's `output` is kept as its JSON."""
        state = {
            "answer": self.answer,
            "stop_reason": self.stop_reason,
            "messages": [message_to_dict(m) for m in self.messages],
            "usage": dataclasses.asdict(self.usage),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "steps": self.steps,
            "run_id": self.run_id,
            "detail": self.detail,
            "pending_approvals": [c.id for c in self.pending_approvals],
            "held_results": [dataclasses.asdict(r) for r in self.held_results],
            **self._tree_state(),
        }
        if self.output is not None:
            state["output"] = to_jsonable_python(self.output)
        return state

    def _tree_state(self) -> dict[str, Any]:
        """What a paused run keeps of where its pending calls are, and what a run with
        sub-runs keeps of them (nothing more for a plain run)."""
        state: dict[str, Any] = {}
        if self.pending_paths:
            state["pending_paths"] = {k: list(v) for k, v in self.pending_paths.items()}
        if self.subruns:
            state["pending_calls"] = [block_to_dict(c) for c in self.pending_approvals]
            state["subruns"] = [subrun_to_dict(s) for s in self.subruns]
        if self.answered_by:
            state["answered_by"] = self.answered_by
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any], *, output_type: Any = None) -> ReActResult:
        """Rebuild a result saved with `to_state`; `output_type` turns a typed run's output
        back from its JSON into the type (without it, the JSON stays as it is).

        Raises:
            ValueError: an inconsistent state, or an output that is not an `output_type`
                (pydantic's `ValidationError` is a `ValueError`).
        """
        messages = [message_from_dict(m) for m in state["messages"]]
        paths = {k: tuple(v) for k, v in state.get("pending_paths", {}).items()}
        if "pending_calls" in state:  # a run with sub-runs: their calls wait too
            pending: list[ToolCall] = [block_from_dict(c) for c in state["pending_calls"]]  # type: ignore[misc]
            if any(type(c) is not ToolCall for c in pending):
                raise ValueError("pending approvals that are not tool calls")
        else:
            pending_ids = set(state["pending_approvals"])
            last = messages[-1].tool_calls if messages else []
            pending = [c for c in last if c.id in pending_ids]
            if len(pending) != len(pending_ids):
                raise ValueError("pending approvals that are not calls of the last turn")
        return cls(
            answer=state["answer"],
            stop_reason=state["stop_reason"],
            messages=messages,
            usage=Usage(**state["usage"]),
            model_calls=state["model_calls"],
            tool_calls=state["tool_calls"],
            steps=state["steps"],
            run_id=state["run_id"],
            detail=state.get("detail", ""),
            pending_approvals=pending,
            held_results=[ToolResult(**r) for r in state["held_results"]],
            output=_output(state.get("output"), output_type),
            pending_paths=paths,
            subruns=[subrun_from_dict(s) for s in state.get("subruns", ())],
            answered_by=state.get("answered_by", ""),
        )


def _output(data: Any, output_type: Any) -> Any:
    if data is None or output_type is None:
        return data
    return pydantic.TypeAdapter(output_type).validate_python(data)
