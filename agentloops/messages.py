"""Messages and their content blocks: the transcript every loop and provider shares, and
`ToolOutcome`, what one tool call produced (the text a `ToolResult` carries back), with
`SubRun` when the call was a run of another loop (an agent tool, a handoff).

Blocks are frozen dataclasses. Providers convert them to and from the wire; thinking
blocks are opaque here and go back to the provider exactly as they came. Rule: this
module knows no model, tool, loop or store (only `errors` and `usage`, below it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from agentloops.usage import Usage


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text from the user or the model."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks for a tool to run."""

    id: str
    """Provider-assigned id; the matching `ToolResult.call_id`."""
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one `ToolCall`, sent back in the next user message."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Thinking:
    """The model's visible reasoning. Opaque: echoed back byte for byte with its signature."""

    text: str
    signature: str


@dataclass(frozen=True, slots=True)
class RedactedThinking:
    """Encrypted reasoning. Opaque: echoed back byte for byte."""

    data: str


Block = Text | ToolCall | ToolResult | Thinking | RedactedThinking
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One turn of the transcript."""

    role: Role
    content: tuple[Block, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        """A user turn holding one text block."""
        return cls("user", (Text(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant turn holding one text block."""
        return cls("assistant", (Text(text),))

    @property
    def text(self) -> str:
        """The text blocks joined with newlines (thinking and tool blocks left out)."""
        texts = []  # a plain loop, as in `tool_calls`: a run's answer is read this way
        for b in self.content:
            if type(b) is Text:
                texts.append(b.text)
        return "\n".join(texts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of this turn, in the order the model asked for them."""
        # A plain loop: a comprehension (or a generator) is a function call of its own
        # before Python 3.12, and every ReAct step asks this once.
        calls = []
        for b in self.content:
            if type(b) is ToolCall:
                calls.append(b)
        return calls

    @property
    def tool_results(self) -> list[ToolResult]:
        """The tool results carried by this turn."""
        return [b for b in self.content if type(b) is ToolResult]


@dataclass(frozen=True, kw_only=True, slots=True)
class SubRun:
    """A run another loop made for one tool call (an agent tool's, or a handoff's), as the
    run that called it sees it: who it was, how it ended, and what it spent (its own
    sub-runs included)."""

    name: str
    """The tool's name (`loop.as_tool(name, ...)`, or a handoff's `transfer_to_<name>`)."""
    call_id: str
    """The calling run's tool call."""
    run_id: str
    """The sub-run's own id: the call's idempotency key (`PARENT_RUN_ID:CALL_ID`)."""
    loop: str
    """Its kind: "react", "rewoo" or "plan_execute"."""
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: int = 0
    cost: Decimal | None = None
    """What its model calls cost, when known."""
    detail: str = ""
    answered_by: str = ""
    """For a handoff: the name of the loop that answered (the end of a chain of handoffs)."""
    pending: tuple[ToolCall, ...] = ()
    """A paused sub-run's calls waiting for a person (its own, and its sub-runs')."""
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """For each pending call: the run ids from this sub-run down to the run that asks."""
    state: dict[str, Any] | None = None
    """A paused sub-run without a store: what resuming it needs (never journaled)."""


def subrun_to_dict(run: SubRun) -> dict[str, Any]:
    """A JSON-ready dict for a `SubRun` (its `state` too, when it has one)."""
    data: dict[str, Any] = {
        "name": run.name,
        "call_id": run.call_id,
        "run_id": run.run_id,
        "loop": run.loop,
        "stop_reason": run.stop_reason,
        "usage": dataclasses.asdict(run.usage),
        "model_calls": run.model_calls,
        "tool_calls": run.tool_calls,
        "cost": None if run.cost is None else str(run.cost),
        "detail": run.detail,
        "answered_by": run.answered_by,
    }
    if run.pending:
        data["pending"] = [block_to_dict(c) for c in run.pending]
        data["paths"] = {k: list(v) for k, v in run.paths.items()}
    if run.state is not None:
        data["state"] = run.state
    return data


def subrun_from_dict(data: dict[str, Any]) -> SubRun:
    """The inverse of `subrun_to_dict`."""
    cost = data.get("cost")
    pending = tuple(block_from_dict(c) for c in data.get("pending", ()))
    return SubRun(
        name=data["name"],
        call_id=data["call_id"],
        run_id=data["run_id"],
        loop=data["loop"],
        stop_reason=data["stop_reason"],
        usage=Usage(**data["usage"]),
        model_calls=data["model_calls"],
        tool_calls=data["tool_calls"],
        cost=None if cost is None else Decimal(cost),
        detail=data.get("detail", ""),
        answered_by=data.get("answered_by", ""),
        pending=pending,  # type: ignore[arg-type]  # tool calls, as written
        paths={k: tuple(v) for k, v in data.get("paths", {}).items()},
        state=data.get("state"),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """What one tool call produced: the text the model sees, and whether it failed."""

    content: str
    is_error: bool = False
    seconds: float = 0.0
    retry: bool = False
    """The tool raised `ModelRetry`: `content` is its message to the model (the loop
    counts these per tool, against the tool's `retries`)."""
    run: SubRun | None = None
    """When the call was a run of another loop (an agent tool, a handoff): that run."""


# -- building records on the hot path -----------------------------------------------------
# Calling a frozen dataclass sets each field through object.__setattr__, and on Python 3.11
# calling any class with a Python __init__ goes through a slow generic slot: together about
# 1.5x to 2x the cost of setting the slots directly. Every ReAct step builds a result and
# a user turn, so the loops build them here: the same frozen records (equal, hashable,
# picklable), every field given. tests/test_messages.py checks them against the classes.

_new = object.__new__
_result_slots = tuple(ToolResult.__dict__[name].__set__ for name in ToolResult.__slots__)
_message_slots = tuple(Message.__dict__[name].__set__ for name in Message.__slots__)
_outcome_slots = tuple(ToolOutcome.__dict__[name].__set__ for name in ToolOutcome.__slots__)


def _tool_result(call_id: str, content: str, is_error: bool) -> ToolResult:
    """`ToolResult(call_id, content, is_error)`, built for the hot path."""
    result: ToolResult = _new(ToolResult)
    set_id, set_content, set_error = _result_slots
    set_id(result, call_id)
    set_content(result, content)
    set_error(result, is_error)
    return result


def _user_turn(content: tuple[Block, ...]) -> Message:
    """`Message("user", content)`, built for the hot path."""
    turn: Message = _new(Message)
    set_role, set_content = _message_slots
    set_role(turn, "user")
    set_content(turn, content)
    return turn


def _outcome(content: str, is_error: bool, seconds: float, retry: bool = False) -> ToolOutcome:
    """`ToolOutcome(content=..., is_error=..., seconds=..., retry=...)`, built for the hot
    path (every tool call)."""
    outcome: ToolOutcome = _new(ToolOutcome)
    set_content, set_error, set_seconds, set_retry, set_run = _outcome_slots
    set_content(outcome, content)
    set_error(outcome, is_error)
    set_seconds(outcome, seconds)
    set_retry(outcome, retry)
    set_run(outcome, None)
    return outcome


def block_to_dict(block: Block) -> dict[str, Any]:
    """A JSON-ready dict for a block (used by checkpoints and event sinks)."""
    if type(block) is Text:
        return {"type": "text", "text": block.text}
    if type(block) is ToolCall:
        return {"type": "tool_call", "id": block.id, "name": block.name, "args": block.args}
    if type(block) is ToolResult:
        return {
            "type": "tool_result",
            "call_id": block.call_id,
            "content": block.content,
            "is_error": block.is_error,
        }
    if type(block) is Thinking:
        return {"type": "thinking", "text": block.text, "signature": block.signature}
    if type(block) is RedactedThinking:
        return {"type": "redacted_thinking", "data": block.data}
    raise TypeError(f"not a message block: {block!r}")


def block_from_dict(data: dict[str, Any]) -> Block:
    """The inverse of `block_to_dict`."""
    kind = data.get("type")
    if kind == "text":
        return Text(data["text"])
    if kind == "tool_call":
        return ToolCall(data["id"], data["name"], dict(data["args"]))
    if kind == "tool_result":
        return ToolResult(data["call_id"], data["content"], bool(data.get("is_error", False)))
    if kind == "thinking":
        return Thinking(data["text"], data["signature"])
    if kind == "redacted_thinking":
        return RedactedThinking(data["data"])
    raise ValueError(f"unknown block type {kind!r}")


def message_to_dict(message: Message) -> dict[str, Any]:
    """A JSON-ready dict for a message."""
    return {"role": message.role, "content": [block_to_dict(b) for b in message.content]}


def message_from_dict(data: dict[str, Any]) -> Message:
    """The inverse of `message_to_dict`; raises `ValueError` on a malformed record."""
    role = data.get("role")
    if role not in ("user", "assistant"):
        raise ValueError(f"unknown message role {role!r}")
    return Message(role, tuple(block_from_dict(b) for b in data["content"]))


def validate_transcript(messages: list[Message], *, allow_pending: bool = False) -> None:
    """Raise `TranscriptError` for a transcript the Anthropic API would reject.

    Checked: it starts with a user turn and roles alternate; no empty text; tool call
    ids are unique; every tool call is answered by exactly one result in the next user
    message, with all results before any text and none anywhere else; thinking blocks
    only in assistant turns and never without their signature. `allow_pending` accepts
    a last assistant turn whose tool calls are not answered yet (a paused run).
    """
    from agentloops.errors import TranscriptError

    if not messages:
        raise TranscriptError("the transcript is empty")
    if messages[0].role != "user":
        raise TranscriptError("message 0: the transcript must start with a user turn")
    seen: set[str] = set()
    open_ids: list[str] = []
    for i, m in enumerate(messages):
        if i and m.role == messages[i - 1].role:
            raise TranscriptError(f"message {i}: two {m.role} turns in a row")
        if not m.content:
            raise TranscriptError(f"message {i}: no content")
        for b in m.content:
            if type(b) is Text and not b.text.strip():
                raise TranscriptError(f"message {i}: empty text block")
        if m.role == "user":
            results = [b for b in m.content if type(b) is ToolResult]
            if any(type(b) in (ToolCall, Thinking, RedactedThinking) for b in m.content):
                raise TranscriptError(f"message {i}: tool calls or thinking in a user turn")
            if any(type(b) is not ToolResult for b in m.content[: len(results)]):
                raise TranscriptError(f"message {i}: text before tool results")
            answered = [r.call_id for r in results]
            if answered != list(dict.fromkeys(answered)):
                raise TranscriptError(f"message {i}: a tool call is answered twice")
            if set(answered) != set(open_ids):
                missing = sorted(set(open_ids) - set(answered))
                extra = sorted(set(answered) - set(open_ids))
                raise TranscriptError(
                    f"message {i}: tool results do not match the previous turn's calls "
                    f"(unanswered: {missing}, unknown: {extra})"
                )
            open_ids = []
        else:
            if any(type(b) is ToolResult for b in m.content):
                raise TranscriptError(f"message {i}: tool result in an assistant turn")
            for b in m.content:
                if type(b) is Thinking and not b.signature:
                    raise TranscriptError(f"message {i}: thinking block without its signature")
            open_ids = [c.id for c in m.tool_calls]
            for call_id in open_ids:
                if call_id in seen:
                    raise TranscriptError(f"message {i}: duplicate tool call id {call_id!r}")
                seen.add(call_id)
    if open_ids and not allow_pending:
        raise TranscriptError(f"message {len(messages) - 1}: tool calls without results")
