"""A Chat Completions reply checked at the boundary, then turned into our `ModelResponse`.

The pydantic models below describe the wire shapes this client reads (unknown fields are
ignored). A 200 reply of another shape (a message that is a string, a token count that is
not a number, a text part whose text is null) is a `ModelError` that names the field, never
an `AttributeError` from deep inside. Streaming assembles its chunks into the same reply
shape, so `complete` and `stream` share `parse_completion`.

Rule: pure functions over the reply's JSON; no HTTP, no loop.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from agentloops._json_text import parse_json
from agentloops._text import quoted
from agentloops._validation import field_errors
from agentloops.errors import ModelError
from agentloops.messages import Message, Text, ToolCall
from agentloops.model import ModelResponse, StopReason
from agentloops.tools import INVALID_ARGUMENTS
from agentloops.usage import Usage

_FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "eos": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    "stop_sequence": "stop_sequence",
}
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)
_Count = Field(default=0, ge=0)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WireDetails(_Wire):
    cached_tokens: int | None = _Count
    cache_write_tokens: int | None = _Count


class WireUsage(_Wire):
    prompt_tokens: int | None = _Count
    completion_tokens: int | None = _Count
    prompt_tokens_details: WireDetails | None = None


class WireFunction(_Wire):
    name: str | None = None
    arguments: Any = None
    """A JSON string as a rule; anything else becomes an error result the model sees."""


class WireToolCall(_Wire):
    id: str | None = None
    function: WireFunction


class WirePart(_Wire):
    type: str = "text"
    text: str | None = None

    @pydantic.model_validator(mode="after")
    def _text_has_text(self) -> WirePart:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part needs a string 'text'")
        return self


class WireMessage(_Wire):
    content: str | list[WirePart] | None = None
    tool_calls: list[WireToolCall] | None = None
    refusal: str | None = None


class WireChoice(_Wire):
    message: WireMessage
    finish_reason: str | None = None


class WireCompletion(_Wire):
    choices: list[WireChoice] = Field(min_length=1)
    usage: WireUsage | None = None
    model: str | None = None


def check(model: type[_Wire], body: Any, what: str) -> Any:
    """`body` validated as `model`, or `ModelError` naming each field that is wrong."""
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as exc:
        problems = "; ".join(field_errors(exc, root="(body)", width=80)[:5])
        raise ModelError(
            f"the server sent {what} of an unexpected shape: {problems}", kind="bad_reply"
        ) from None


def parse_completion(
    body: Any, *, model: str, structured: bool, taken: set[str], final_tool: str | None = None
) -> tuple[ModelResponse, dict[str, str]]:
    """The response, and each valid call's raw `arguments` by id (to echo them exactly).

    With `structured`, `output` is the final-answer tool's arguments (`final_tool`, when
    the request offered it), else the JSON in the text of a reply that calls no tool.

    `taken` holds the call ids already in the transcript: a missing id is generated and
    a reused one gets a `_d<n>` suffix (llama.cpp and small gateways repeat ids).

    Raises:
        ModelError: a body without `choices` (a gateway's error page sent with 200), a
            body of another shape (naming the field), or an unknown `finish_reason`.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices:
        raise ModelError(
            f"the server's reply has no choices: {json.dumps(body)[:500]}", kind="bad_reply"
        )
    reply: WireCompletion = check(WireCompletion, body, "a reply")
    choice = reply.choices[0]
    wire = choice.message
    text = refusal = wire.refusal or ""
    if not refusal:
        text = content_text(wire.content)  # reasoning_content / reasoning stay out
    blocks: list[Any] = [Text(text)] if text.strip() else []
    raw_args: dict[str, str] = {}
    for call in wire.tool_calls or []:
        call_id = fresh_id(call.id or "", taken)
        raw = call.function.arguments
        args = parse_arguments(raw)
        if isinstance(raw, str) and raw.strip() and INVALID_ARGUMENTS not in args:
            raw_args[call_id] = raw
        blocks.append(ToolCall(call_id, call.function.name or "", args))
    reason = "refusal" if refusal else stop_reason(choice.finish_reason, bool(wire.tool_calls))
    message = Message("assistant", tuple(blocks))
    output = None
    if structured and reason != "refusal":
        calls = message.tool_calls
        if final_tool is not None:
            output = next((c.args for c in calls if c.name == final_tool), None)
        if output is None and not calls:  # a turn that calls tools is not the answer
            output = parse_json(text)
    usage = usage_from_wire(reply.usage)
    response = ModelResponse(
        message, reason, usage, reply.model or model, output, usage_reported=reply.usage is not None
    )
    return response, raw_args


def parse_arguments(raw: Any) -> dict[str, Any]:
    """The call's arguments as a dict; what cannot be used is marked `INVALID_ARGUMENTS`."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}  # a call without arguments: some servers send "" (or nothing)
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return {INVALID_ARGUMENTS: f"arguments must be a JSON object, got {quoted(raw, 200)}"}
    try:
        # strict=False: a raw newline or tab inside a string (small models write them) is kept
        value = json.loads(raw, strict=False)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = json.loads(value, strict=False)  # double-encoded by some small models
    except ValueError as exc:
        return {
            INVALID_ARGUMENTS: f"the arguments were not valid JSON ({exc}): {quoted(raw, 200)}. "
            "Call the tool again with a JSON object."
        }
    if not isinstance(value, dict):
        return {
            INVALID_ARGUMENTS: f"the arguments must be a JSON object, got "
            f"{type(value).__name__}: {quoted(raw, 200)}"
        }
    return value


def usage_from_wire(usage: WireUsage | None) -> Usage:
    """`prompt_tokens` less its cached part is uncached input; cached tokens are cache reads."""
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details or WireDetails()
    cached, written = details.cached_tokens or 0, details.cache_write_tokens or 0
    return Usage(
        input_tokens=max((usage.prompt_tokens or 0) - cached - written, 0),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def content_text(content: str | list[WirePart] | None) -> str:
    if isinstance(content, list):  # content parts; other part types carry no answer text
        content = "".join(p.text or "" for p in content if p.type == "text")
    if not content:
        return ""
    return _THINK.sub("", content, count=1)  # servers that inline reasoning in <think> tags


def fresh_id(call_id: str, taken: set[str]) -> str:
    if not call_id:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
    fresh, n = call_id, 0
    while fresh in taken:
        n += 1
        fresh = f"{call_id}_d{n}"
    taken.add(fresh)
    return fresh


def stop_reason(finish: str | None, has_calls: bool) -> StopReason:
    if finish is None:
        return "tool_use" if has_calls else "end_turn"
    reason = _FINISH.get(finish)
    if reason is None:
        raise ModelError(
            f"the server finished with an unknown finish_reason {finish!r}", kind="bad_reply"
        )
    if reason == "end_turn" and has_calls:
        return "tool_use"  # e.g. older Ollama reports "stop" for a tool-calling turn
    return reason
