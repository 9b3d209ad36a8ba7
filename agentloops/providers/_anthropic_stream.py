"""Claude's streamed reply put back together (no I/O): each server-sent event is checked
as it arrives, says which deltas it adds, and the whole becomes the same reply body a
plain call returns, checked by the same models.

A stream that ends before `message_stop`, or sends an `error` event, is a `ModelError`:
nothing, and no tool call in particular, is taken from a partial reply.

Rule: no I/O and no loop; the caller feeds it events.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NoReturn

import pydantic
from pydantic import BaseModel, ConfigDict, Tag

from agentloops.errors import ErrorKind, ModelError
from agentloops.events import Delta, TextDelta, ThinkingDelta, ToolCallDelta
from agentloops.providers._anthropic_reply import (
    Count,
    ToolUseBlock,
    WireBlock,
    WireMessage,
    by_type,
    problems,
    read_reply,
)

_ERROR_KINDS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limited",
    "api_error": "unavailable",
    "timeout_error": "timeout",
}
"""An `error` event's type, as a `ModelError.kind`."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _TextDelta(_Open):
    type: Literal["text_delta"]
    text: str


class _ThinkingDelta(_Open):
    type: Literal["thinking_delta"]
    thinking: str


class _SignatureDelta(_Open):
    type: Literal["signature_delta"]
    signature: str


class _JsonDelta(_Open):
    type: Literal["input_json_delta"]
    partial_json: str


class _CitationsDelta(_Open):
    type: Literal["citations_delta"]
    citation: dict[str, Any]


class _OtherDelta(_Open):
    type: str


_AnyDelta = Annotated[
    Annotated[_TextDelta, Tag("text_delta")]
    | Annotated[_ThinkingDelta, Tag("thinking_delta")]
    | Annotated[_SignatureDelta, Tag("signature_delta")]
    | Annotated[_JsonDelta, Tag("input_json_delta")]
    | Annotated[_CitationsDelta, Tag("citations_delta")]
    | Annotated[_OtherDelta, Tag("other")],
    by_type(
        frozenset(
            {
                "text_delta",
                "thinking_delta",
                "signature_delta",
                "input_json_delta",
                "citations_delta",
            }
        )
    ),
]


class _MessageStart(_Open):
    type: Literal["message_start"]
    message: WireMessage


class _BlockStart(_Open):
    type: Literal["content_block_start"]
    index: Count
    content_block: dict[str, Any]


_BLOCK: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(WireBlock)
_FILLED_LATER: dict[str, dict[str, Any]] = {
    "text": {"text": ""},
    "thinking": {"thinking": "", "signature": ""},
    "tool_use": {"input": {}},
}
"""What a block's deltas fill in, so a start that leaves it out still reads."""


class _BlockDelta(_Open):
    type: Literal["content_block_delta"]
    index: Count
    delta: _AnyDelta


class _StopInfo(_Open):
    stop_reason: str | None = None


class _DeltaUsage(_Open):
    output_tokens: Count
    input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None


class _MessageDelta(_Open):
    type: Literal["message_delta"]
    delta: _StopInfo
    usage: _DeltaUsage | None = None
    """Left out by some gateways: the reply stands, its usage says so (`usage_reported`)."""


class _MessageStop(_Open):
    type: Literal["message_stop"]


class _ErrorBody(_Open):
    type: str
    message: str


class _Error(_Open):
    type: Literal["error"]
    error: _ErrorBody


class _Other(_Open):
    """`ping`, `content_block_stop`, and event types newer than this code: nothing to do."""

    type: str


_Event: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(
    Annotated[
        Annotated[_MessageStart, Tag("message_start")]
        | Annotated[_BlockStart, Tag("content_block_start")]
        | Annotated[_BlockDelta, Tag("content_block_delta")]
        | Annotated[_MessageDelta, Tag("message_delta")]
        | Annotated[_MessageStop, Tag("message_stop")]
        | Annotated[_Error, Tag("error")]
        | Annotated[_Other, Tag("other")],
        by_type(
            frozenset(
                {
                    "message_start",
                    "content_block_start",
                    "content_block_delta",
                    "message_delta",
                    "message_stop",
                    "error",
                }
            )
        ),
    ]
)


class Assembly:
    """One streamed reply, built event by event.

    Args:
        first_call: the position of this reply's first tool call among the turn's calls
            (a `pause_turn` continuation numbers its calls after the earlier parts').
        request_id: quoted in errors.
    """

    def __init__(self, first_call: int = 0, request_id: str | None = None):
        self.request_id = request_id
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._calls: dict[int, int] = {}
        self._next_call = first_call
        self._events = 0
        self._stopped = False
        self.usage_reported = True
        """False: the `message_delta` left out its usage (only message_start's counts)."""

    def feed(self, data: str) -> list[Delta]:
        """Take one event's JSON data; return the deltas it adds.

        Raises:
            ModelError: an `error` event, or an event that is not what the API sends.
        """
        self._events += 1
        try:
            event = _Event.validate_json(data)
        except pydantic.ValidationError as exc:
            self._fail(f"an event agentloops cannot read: {problems(exc, '(event)')}")
        if isinstance(event, _Error):
            kind = _ERROR_KINDS.get(event.error.type, "other")
            self._fail(f"{event.error.type}: {event.error.message}", kind)
        if isinstance(event, _MessageStart):
            self._message = event.message.model_dump(exclude={"content"})
            return []
        if self._message is None and not isinstance(event, _Other):
            self._fail(f"a {event.type} event before message_start")
        if isinstance(event, _BlockStart):
            return self._start(event.index, event.content_block)
        if isinstance(event, _BlockDelta):
            return self._delta(event.index, event.delta)
        if isinstance(event, _MessageDelta):
            assert self._message is not None
            self._message["stop_reason"] = event.delta.stop_reason
            if event.usage is None:  # a complete reply all the same: keep it, and say so
                self.usage_reported = False
                return []
            # Counts on message_delta are totals; those left out keep message_start's.
            counts = event.usage.model_dump(exclude_none=True)
            self._message["usage"] = {**self._message["usage"], **counts}
        elif isinstance(event, _MessageStop):
            self._stopped = True
        return []

    def reply(self) -> WireMessage:
        """The whole reply, checked like a plain call's body.

        Raises:
            ModelError: the stream ended before `message_stop` (cut off), or a tool
                call's arguments are not a JSON object.
        """
        if not self._stopped or self._message is None:
            self._fail(
                f"the stream ended before message_stop, after {self._events} events: "
                "the reply is incomplete and was not used"
            )
        for index, parts in self._json.items():
            block, arguments = self._blocks[index], "".join(parts)
            try:
                block["input"] = json.loads(arguments) if arguments else block["input"]
            except ValueError as exc:
                self._fail(
                    f"the arguments of {block['type']} {block.get('id')!r} are not JSON "
                    f"({exc}): {arguments!r:.200}"
                )
        content = [self._blocks[i] for i in sorted(self._blocks)]
        return read_reply({**self._message, "content": content}, self.request_id)

    def _start(self, index: int, raw: dict[str, Any]) -> list[Delta]:
        if index in self._blocks:
            self._fail(f"content block {index} started twice")
        kind = raw.get("type")
        filled_later = _FILLED_LATER.get(kind, {}) if isinstance(kind, str) else {}
        try:
            block = _BLOCK.validate_python({**filled_later, **raw})
        except pydantic.ValidationError as exc:
            self._fail(f"a block start agentloops cannot read: {problems(exc, '(block)')}")
        self._blocks[index] = block.model_dump()
        if not isinstance(block, ToolUseBlock):
            return []
        self._calls[index] = position = self._next_call
        self._next_call += 1
        return [ToolCallDelta(index=position, call_id=block.id, name=block.name)]

    def _delta(self, index: int, delta: Any) -> list[Delta]:
        block = self._blocks.get(index)
        if block is None:
            self._fail(f"a {delta.type} for content block {index}, which never started")
        kind = block["type"]
        if isinstance(delta, _OtherDelta):
            return []
        if isinstance(delta, _JsonDelta) and "input" in block:
            self._json.setdefault(index, []).append(delta.partial_json)
            if index in self._calls and delta.partial_json:
                return [ToolCallDelta(index=self._calls[index], arguments=delta.partial_json)]
            return []
        if isinstance(delta, _TextDelta) and kind == "text":
            block["text"] += delta.text
            return [TextDelta(text=delta.text)]
        if isinstance(delta, _CitationsDelta) and kind == "text":
            block["citations"] = [*(block.get("citations") or []), delta.citation]
            return []
        if isinstance(delta, _ThinkingDelta) and kind == "thinking":
            block["thinking"] += delta.thinking
            return [ThinkingDelta(text=delta.thinking)]
        if isinstance(delta, _SignatureDelta) and kind == "thinking":
            block["signature"] = delta.signature
            return []
        self._fail(f"a {delta.type} for content block {index}, a {kind} block")

    def _fail(self, problem: str, kind: ErrorKind = "bad_reply") -> NoReturn:
        raise ModelError(
            f"Anthropic API stream failed: {problem}", request_id=self.request_id, kind=kind
        )
