"""Claude's reply, checked where it enters, and turned into one `ModelResponse`.

Pydantic models of the Messages API reply (only what agentloops reads) turn a body of
the wrong shape into a `ModelError` naming the bad fields. `Turn` holds the decisions
of one assistant turn (continue a `pause_turn`, merge the parts, map the stop reason),
shared by the plain, async and streaming calls, which only send and receive.

Rule: pure functions over the SDK's reply; no HTTP, no loop.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from agentloops._json_text import parse_json
from agentloops._validation import field_errors
from agentloops.errors import ModelError
from agentloops.messages import Block, Message, RedactedThinking, Text, Thinking, ToolCall
from agentloops.model import ModelResponse, StopReason
from agentloops.usage import Usage

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "context_window",
}
MAX_CONTINUATIONS = 5
"""`pause_turn` continuations per call before the pause is handed to the loop."""
_MAX_PROBLEMS = 5
"""Validation problems quoted in one error; the rest are counted."""

Count = Annotated[int, Field(ge=0)]


class _Block(BaseModel):
    # Fields agentloops does not read (citations, a server tool's extras) are kept,
    # because a paused turn goes back to the API exactly as it came.
    model_config = ConfigDict(extra="allow")

    type: str


class TextBlock(_Block):
    type: Literal["text"]
    text: str


class ThinkingBlock(_Block):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(_Block):
    type: Literal["redacted_thinking"]
    data: str


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class OtherBlock(_Block):
    """A block agentloops does not use (server tools and their results)."""


def by_type(known: frozenset[str]) -> Discriminator:
    """Choose a union member by the value's `type`; a type not in `known` is "other"."""

    def kind(value: Any) -> str:
        found = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return found if isinstance(found, str) and found in known else "other"

    return Discriminator(kind)


WireBlock = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[OtherBlock, Tag("other")],
    by_type(frozenset({"text", "thinking", "redacted_thinking", "tool_use"})),
]


class WireUsage(BaseModel):
    input_tokens: Count
    output_tokens: Count
    cache_read_input_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None


class WireMessage(BaseModel):
    """A reply of the Messages API, as far as agentloops reads it."""

    model: str
    content: list[WireBlock]
    stop_reason: str | None
    usage: WireUsage


def read_reply(body: bytes | dict[str, Any], request_id: str | None) -> WireMessage:
    """Check a reply body (JSON bytes, or the dict a stream was assembled into).

    Raises:
        ModelError: the body is not JSON, or lacks a field agentloops reads, or has one
            of the wrong type; the message names each problem.
    """
    try:
        if isinstance(body, bytes):
            return WireMessage.model_validate_json(body)
        return WireMessage.model_validate(body)
    except pydantic.ValidationError as exc:
        raise ModelError(
            f"Anthropic API sent a reply agentloops cannot read: {problems(exc, '(reply)')}",
            request_id=request_id,
            kind="bad_reply",
        ) from None


def problems(error: pydantic.ValidationError, root: str) -> str:
    """The first few field-level problems of `error`, joined, with a count of the rest."""
    lines = field_errors(error, root=root)
    shown = "; ".join(lines[:_MAX_PROBLEMS])
    more = len(lines) - _MAX_PROBLEMS
    return f"{shown}; and {more} more" if more > 0 else shown


class Turn:
    """One assistant turn over its `pause_turn` continuations. No I/O: a driver sends
    `next`, hands each reply to `add` until `next` is None, then reads `response()`."""

    def __init__(self, params: dict[str, Any], *, structured: bool, final_tool: str | None = None):
        self.next: dict[str, Any] | None = params
        """The `messages.create` arguments to send next; None when the turn is complete."""
        self._params = params
        self._structured = structured
        self._final_tool = final_tool
        """The final-answer tool whose arguments are the answer, when the request offered it."""
        self._content: list[WireBlock] = []
        self._usage = Usage()
        self._continued = 0
        self._last: WireMessage | None = None
        self._request_id: str | None = None
        self._usage_reported = True

    @property
    def tool_calls(self) -> int:
        """Tool calls received so far (a continuation's calls are numbered after them)."""
        return sum(isinstance(b, ToolUseBlock) for b in self._content)

    def add(
        self, reply: WireMessage, request_id: str | None, *, usage_reported: bool = True
    ) -> None:
        """Take the reply to `next`, and decide what (if anything) to send after it.
        `usage_reported`: False when the reply left out its token counts."""
        self._content += reply.content
        self._usage_reported = self._usage_reported and usage_reported
        self._usage += _usage(reply.usage)
        self._last, self._request_id = reply, request_id
        self.next = None
        if reply.stop_reason == "pause_turn" and self._continued < MAX_CONTINUATIONS:
            self._continued += 1
            # The API continues a paused turn when it gets the turn back as the last message.
            content = [b.model_dump() for b in self._content if _keep(b)]
            paused = {"role": "assistant", "content": content}
            self.next = {**self._params, "messages": [*self._params["messages"], paused]}

    def response(self) -> ModelResponse:
        """The turn as a `ModelResponse` (all parts merged, usage summed).

        Raises:
            ModelError: the API ended the turn with a stop reason agentloops does not know.
        """
        last = self._last
        assert last is not None and self.next is None, "response() before the turn is complete"
        stop_reason = STOP_REASONS.get(last.stop_reason or "")
        if stop_reason is None:
            raise ModelError(
                f"Anthropic API returned an unknown stop_reason {last.stop_reason!r}",
                request_id=self._request_id,
                kind="bad_reply",
            )
        message = Message("assistant", _blocks(self._content))
        output = None
        if self._structured and stop_reason != "refusal":
            calls = message.tool_calls
            final = self._final_tool
            output = next((c.args for c in calls if c.name == final), None) if final else None
            if output is None and not calls:  # a turn that calls tools is not the answer
                output = parse_json(message.text)
        return ModelResponse(
            message,
            stop_reason,
            self._usage,
            last.model,
            output,
            usage_reported=self._usage_reported,
        )


def _keep(block: WireBlock) -> bool:
    return not isinstance(block, TextBlock) or bool(block.text.strip())


def _blocks(content: list[WireBlock]) -> tuple[Block, ...]:
    """Our blocks for the API's. Server-tool blocks (web search, code execution) are left
    out: agentloops never offers server tools, and a loop could not answer them."""
    blocks: list[Block] = []
    for b in filter(_keep, content):
        if isinstance(b, TextBlock):
            blocks.append(Text(b.text))
        elif isinstance(b, ThinkingBlock):
            blocks.append(Thinking(b.thinking, b.signature))
        elif isinstance(b, RedactedThinkingBlock):
            blocks.append(RedactedThinking(b.data))
        elif isinstance(b, ToolUseBlock):
            blocks.append(ToolCall(b.id, b.name, dict(b.input)))
    return tuple(blocks)


def _usage(usage: WireUsage) -> Usage:
    # Anthropic's input_tokens already excludes the tokens read from or written to the cache.
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )
