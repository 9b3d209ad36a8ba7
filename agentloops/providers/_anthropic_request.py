"""The Messages API request for a `ModelRequest` (pure functions, no HTTP).

A loop sends the same growing transcript every step, so its wire form is kept between
calls and only the new messages are converted; each thread and each asyncio task keeps
its own (a context variable), so concurrent runs on one model never mix.

Rule: no I/O; it knows the vocabulary only.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

from agentloops.errors import ConfigurationError
from agentloops.messages import (
    Block,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)
from agentloops.model import ModelRequest

Mechanism = Literal["native", "tool"]
"""How a request with `output` asks for JSON: `output_config.format` (native JSON-schema
output, which the API accepts next to tools and with every thinking setting), or a
final-answer tool whose arguments are the answer."""

FINAL_TOOL_DESCRIPTION = (
    "Give your final answer: call this tool once, with the answer as its arguments, when "
    "you are done (instead of answering in text)."
)

_MARKABLE = frozenset({"text", "tool_result", "tool_use"})
"""Block types that may carry `cache_control` (thinking blocks may not)."""
_EPHEMERAL = {"type": "ephemeral"}


def build_params(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int,
    thinking: dict[str, Any] | None,
    cache: bool,
    transform_schema: Callable[[dict[str, Any]], dict[str, Any]],
    mechanism: Mechanism = "native",
) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for `request`; `mechanism` says how a
    request with `output` asks for JSON.

    Raises:
        ConfigurationError: a request the API would reject (a forced tool that is not
            offered, forced tool use with manual thinking, or a tool named like the
            final-answer tool).
    """
    final = request.output is not None and mechanism == "tool"
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or max_tokens,
        "messages": _transcript(request.messages).sync(request.messages, cache),
    }
    system_text = request.system
    if final:
        assert request.output is not None
        note = f"Give your final answer by calling the {request.output.tool} tool."
        system_text = f"{system_text}\n\n{note}".strip()
    if system_text:
        system: dict[str, Any] = {"type": "text", "text": system_text}
        if cache:
            system["cache_control"] = _EPHEMERAL
        params["system"] = [system]
    if request.tools or final:
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if final:
            tools.append(_final_tool(request))
        if cache:
            tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
        params["tools"] = tools
        params["tool_choice"] = (
            _final_choice(request, thinking) if final else _tool_choice(request, thinking)
        )
    elif request.tool_choice not in ("auto", "none"):
        raise ConfigurationError(
            f"tool_choice={request.tool_choice!r} forces a tool, but no tools were offered"
        )
    if thinking is not None:
        params["thinking"] = thinking
    if request.output is not None and not final:
        # The API accepts a subset of JSON Schema; the SDK's own transform (the one
        # `messages.parse` uses) closes objects and moves unsupported keywords into
        # descriptions. Validation stays with agentloops.structured.
        schema = transform_schema(request.output.schema)
        params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    return params


def _final_tool(request: ModelRequest) -> dict[str, Any]:
    output = request.output
    assert output is not None
    if any(t.name == output.tool for t in request.tools):
        raise ConfigurationError(
            f"a tool is named {output.tool!r}, the name of the final-answer tool; rename it"
        )
    return {
        "name": output.tool,
        "description": FINAL_TOOL_DESCRIPTION,
        "input_schema": output.schema,
    }


def _final_choice(request: ModelRequest, thinking: dict[str, Any] | None) -> dict[str, Any]:
    """Make the model end on a tool call (the final-answer tool, or a real one to go on
    with), unless manual thinking forbids forcing: then `auto` and the system prompt ask."""
    output = request.output
    assert output is not None
    if (thinking or {}).get("type") == "enabled":
        return {"type": "auto"}
    choice = request.tool_choice
    if choice == "none" or (choice == "auto" and not request.tools):
        return {"type": "tool", "name": output.tool}  # nothing else may be called
    if choice == "auto":
        return {"type": "any"}
    return _tool_choice(request, thinking)


def _tool_choice(request: ModelRequest, thinking: dict[str, Any] | None) -> dict[str, Any]:
    choice = request.tool_choice
    if choice in ("auto", "any", "none"):
        mapped: dict[str, Any] = {"type": choice}
    elif any(t.name == choice for t in request.tools):
        mapped = {"type": "tool", "name": choice}
    else:
        names = [t.name for t in request.tools]
        raise ConfigurationError(f"tool_choice={choice!r} names no offered tool; tools: {names}")
    if mapped["type"] in ("any", "tool") and (thinking or {}).get("type") == "enabled":
        raise ConfigurationError(
            f"tool_choice={choice!r} forces tool use, which the API rejects with manual "
            'thinking ({"type": "enabled"}); use thinking="adaptive" or tool_choice="auto"'
        )
    return mapped


class _Transcript:
    """The wire form of one live transcript, extended as the loop appends to it.

    Loops send the same list every step and only append, so each call converts only the
    new messages (per-step cost stays flat in transcript length). The cache breakpoint
    on the newest message is a marked copy swapped into the last slot; the unmarked
    original goes back before the next extension, so no old message keeps a marker.
    """

    def __init__(self, source: list[Message]):
        self.source = source
        self.params: list[dict[str, Any]] = []
        self.done = 0
        self.last: Message | None = None
        self.unmarked: tuple[int, dict[str, Any]] | None = None

    def extends(self, messages: list[Message]) -> bool:
        """Whether `messages` is the same list, still holding what was converted."""
        return (
            messages is self.source
            and len(messages) >= self.done
            and (self.done == 0 or messages[self.done - 1] is self.last)
        )

    def sync(self, messages: list[Message], cache: bool) -> list[dict[str, Any]]:
        params = self.params
        if self.unmarked is not None:
            index, original = self.unmarked
            params[index] = original
            self.unmarked = None
        for message in messages[self.done :]:
            blocks = [p for p in map(_block_param, message.content) if p is not None]
            if blocks:  # an empty turn is left out; the API merges the turns around it
                params.append({"role": message.role, "content": blocks})
        self.done = len(messages)
        self.last = messages[-1] if messages else None
        if cache and params and params[-1]["content"][-1]["type"] in _MARKABLE:
            newest = params[-1]
            *head, tail = newest["content"]
            marked = {**tail, "cache_control": _EPHEMERAL}
            self.unmarked = (len(params) - 1, newest)
            params[-1] = {**newest, "content": [*head, marked]}
        return params


_TRANSCRIPT: ContextVar[_Transcript | None] = ContextVar("anthropic_transcript", default=None)
"""The transcript converted last in this thread or asyncio task (tasks copy the context
they start in, so a task never extends its parent's list in place of its own)."""


def _transcript(messages: list[Message]) -> _Transcript:
    transcript = _TRANSCRIPT.get()
    if transcript is None or not transcript.extends(messages):
        transcript = _Transcript(messages)
        _TRANSCRIPT.set(transcript)
    return transcript


def _block_param(block: Block) -> dict[str, Any] | None:
    if type(block) is Text:
        # The API rejects whitespace-only text blocks, including its own when echoed.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if type(block) is ToolResult:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.call_id}
        if block.content:  # an empty content string is rejected; no content is not
            result["content"] = block.content
        if block.is_error:
            result["is_error"] = True
        return result
    if type(block) is ToolCall:
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.args}
    if type(block) is Thinking:
        return {"type": "thinking", "thinking": block.text, "signature": block.signature}
    if type(block) is RedactedThinking:
        return {"type": "redacted_thinking", "data": block.data}
    raise TypeError(f"not a message block: {block!r}")
