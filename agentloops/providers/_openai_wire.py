"""Our records to and from the Chat Completions wire format (pure functions, no HTTP).

The model's `arguments` are parsed defensively: an empty string is `{}`, and JSON that
does not parse (or is not an object) becomes a `ToolCall` whose args carry
`INVALID_ARGUMENTS`, which the registry answers with an error result the model sees.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from agentloops.errors import ModelError
from agentloops.messages import Message, Text, ToolCall
from agentloops.model import ModelRequest, ModelResponse, StopReason, ToolSpec, Usage
from agentloops.structured import parse_json
from agentloops.tools import INVALID_ARGUMENTS

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
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def tools_to_wire(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": s.input_schema,
            },
        }
        for s in specs
    ]


def tool_choice_to_wire(choice: str) -> str | dict[str, Any]:
    """`"auto"`, `"none"`, `"any"` (sent as `"required"`) or one tool's name."""
    if choice in ("auto", "none"):
        return choice
    if choice == "any":
        return "required"
    return {"type": "function", "function": {"name": choice}}


def response_format(request: ModelRequest) -> dict[str, Any]:
    assert request.output is not None
    name = _SCHEMA_NAME.sub("_", request.output.name)[:64] or "output"
    schema = request.output.schema
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def schema_prompt(request: ModelRequest) -> str:
    """The system-prompt fallback for servers without JSON-schema output."""
    assert request.output is not None
    schema = json.dumps(request.output.schema, separators=(",", ":"))
    return (
        "Reply with only a JSON object, no prose and no code fence, "
        f"that matches this JSON Schema:\n{schema}"
    )


def messages_to_wire(
    system: str, messages: list[Message], echo: Callable[[ToolCall], str]
) -> list[dict[str, Any]]:
    """System first; assistant turns as returned; one `tool` message per result, in order,
    then the turn's text as a user message. Thinking blocks (another provider's) are left
    out: Chat Completions has no place for them."""
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        text = "\n\n".join(b.text for b in m.content if type(b) is Text and b.text)
        if m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = m.tool_calls
            if calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": echo(c)},
                    }
                    for c in calls
                ]
            elif not text:
                turn["content"] = ""
            wire.append(turn)
            continue
        for r in m.tool_results:
            content = r.content or "(no output)"
            if r.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"
            wire.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
        if text:
            wire.append({"role": "user", "content": text})
    return wire


def parse_arguments(raw: Any) -> dict[str, Any]:
    """The call's arguments as a dict; what cannot be used is marked `INVALID_ARGUMENTS`."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}  # a call without arguments: some servers send "" (or nothing)
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return {INVALID_ARGUMENTS: f"arguments must be a JSON object, got {raw!r:.200}"}
    try:
        value = json.loads(raw)
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = json.loads(value)  # double-encoded by some small models
    except ValueError as exc:
        return {
            INVALID_ARGUMENTS: f"the arguments were not valid JSON ({exc}): {raw!r:.200}. "
            "Call the tool again with a JSON object."
        }
    if not isinstance(value, dict):
        return {
            INVALID_ARGUMENTS: f"the arguments must be a JSON object, got "
            f"{type(value).__name__}: {raw!r:.200}"
        }
    return value


def usage_from_wire(usage: Any) -> Usage:
    """`prompt_tokens` less its cached part is uncached input; cached tokens are cache reads."""
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    return Usage(
        input_tokens=max(int(usage.get("prompt_tokens") or 0) - cached - written, 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def parse_completion(
    body: Any, *, model: str, structured: bool, taken: set[str]
) -> tuple[ModelResponse, dict[str, str]]:
    """The response, and each valid call's raw `arguments` by id (to echo them exactly).

    `taken` holds the call ids already in the transcript: a missing id is generated and
    a reused one gets a `_d<n>` suffix (llama.cpp and small gateways repeat ids).

    Raises:
        ModelError: a body without `choices` (a gateway's error page sent with 200), or
            a `finish_reason` this client does not know.
    """
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ModelError(f"the server's reply has no choices: {json.dumps(body)[:500]}")
    choice = choices[0]
    wire = choice.get("message") or {}
    text = _content_text(wire.get("content"))  # reasoning_content / reasoning stay out
    blocks: list[Any] = []
    refusal = wire.get("refusal")
    if refusal:
        text = refusal
    if text.strip():
        blocks.append(Text(text))
    raw_args: dict[str, str] = {}
    for call in wire.get("tool_calls") or []:
        function = call.get("function") or {}
        call_id = _fresh_id(str(call.get("id") or ""), taken)
        raw = function.get("arguments")
        args = parse_arguments(raw)
        if isinstance(raw, str) and INVALID_ARGUMENTS not in args:
            raw_args[call_id] = raw
        blocks.append(ToolCall(call_id, str(function.get("name") or ""), args))
    has_calls = any(type(b) is ToolCall for b in blocks)
    reason = _stop_reason(choice.get("finish_reason"), has_calls)
    if refusal:
        reason = "refusal"
    output = parse_json(text) if structured else None
    message = Message("assistant", tuple(blocks))
    usage = usage_from_wire(body.get("usage"))
    response = ModelResponse(message, reason, usage, str(body.get("model") or model), output)
    return response, raw_args


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str):
        return ""
    return _THINK.sub("", content, count=1)  # servers that inline reasoning in <think> tags


def _fresh_id(call_id: str, taken: set[str]) -> str:
    if not call_id:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
    fresh, n = call_id, 0
    while fresh in taken:
        n += 1
        fresh = f"{call_id}_d{n}"
    taken.add(fresh)
    return fresh


def _stop_reason(finish: Any, has_calls: bool) -> StopReason:
    if finish is None:
        return "tool_use" if has_calls else "end_turn"
    reason = _FINISH.get(str(finish))
    if reason is None:
        raise ModelError(f"the server finished with an unknown finish_reason {finish!r}")
    if reason == "end_turn" and has_calls:
        return "tool_use"  # e.g. older Ollama reports "stop" for a tool-calling turn
    return reason
