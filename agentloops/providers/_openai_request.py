"""A `ModelRequest` as a Chat Completions request body (pure functions, no HTTP).

Structured output has four mechanisms, because servers offer different ones:
`"json_schema"` (OpenAI, vLLM, Ollama, llama.cpp's `llama-server`), `"json_object"` with a
`schema` beside it (llama-cpp-python's server enforces that schema with a grammar), `"tool"`
(a final-answer function offered next to the request's tools, its arguments the answer),
and `"prompt"` (the schema in the system prompt, for servers with none of them).

Rule: no I/O; it knows the vocabulary only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from agentloops.errors import ConfigurationError
from agentloops.messages import Message, Text, ToolCall
from agentloops.model import ModelRequest, ToolSpec

Mechanism = Literal["json_schema", "json_object", "tool", "prompt"]
"""How one request asks for JSON output."""

FALLBACK: dict[Mechanism, Mechanism] = {"json_schema": "json_object", "json_object": "prompt"}
"""The next mechanism to try when a server refuses `response_format` of this kind, for a
request without tools."""

TOOLS_FALLBACK: dict[tuple[Mechanism, str], Mechanism] = {
    ("json_schema", "response_format"): "tool",
    ("json_object", "response_format"): "tool",
    ("tool", "tool_choice"): "prompt",
}
"""For a request with tools: (mechanism, what the server refused) to the next one. A grammar
(`json_object`) would keep the model from calling tools, so it is skipped; a server that
refuses to be made to call a tool gets the schema in the prompt."""

FINAL_TOOL_DESCRIPTION = (
    "Give your final answer: call this function once, with the answer as its arguments, "
    "when you are done (instead of answering in text)."
)

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


def request_body(
    request: ModelRequest,
    *,
    model: str,
    mechanism: Mechanism | None,
    max_tokens: tuple[str, int] | None,
    stream: bool,
    echo: Callable[[ToolCall], str],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The JSON body for `request`; `mechanism` is how to ask for JSON when it has `output`,
    `max_tokens` the limit's field name and value, and `extra` is merged in last."""
    system = request.system
    output = request.output
    if output is not None and mechanism == "tool":
        note = f"Give your final answer by calling the {output.tool} function."
        system = f"{system}\n\n{note}".strip()
    elif output is not None and mechanism != "json_schema":
        # json_object needs the schema in the prompt too: OpenAI refuses json_object unless
        # the messages say "JSON", and a server without a grammar only has the prompt to go by.
        system = f"{system}\n\n{schema_prompt(request)}".strip()
    body: dict[str, Any] = {
        "model": model,
        "messages": messages_to_wire(system, request.messages, echo),
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if max_tokens is not None:
        body[max_tokens[0]] = max_tokens[1]
    if output is not None and mechanism == "tool":
        body["tools"] = [*tools_to_wire(request.tools), final_tool(request)]
        body["tool_choice"] = final_choice(request)
    elif request.tools:
        body["tools"] = tools_to_wire(request.tools)
        body["tool_choice"] = tool_choice_to_wire(request.tool_choice)
    if request.output is not None and mechanism in ("json_schema", "json_object"):
        body["response_format"] = response_format(request, mechanism)
    body.update(extra)
    return body


def response_format(request: ModelRequest, mechanism: Mechanism) -> dict[str, Any]:
    assert request.output is not None
    schema = request.output.schema
    if mechanism == "json_object":
        return {"type": "json_object", "schema": schema}
    name = _SCHEMA_NAME.sub("_", request.output.name)[:64] or "output"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def schema_prompt(request: ModelRequest) -> str:
    """The schema as an instruction, for servers without JSON-schema output (with tools:
    for the final answer, so the model still calls them)."""
    assert request.output is not None
    schema = json.dumps(request.output.schema, separators=(",", ":"))
    when = "When you give your final answer, reply" if request.tools else "Reply"
    return (
        f"{when} with only a JSON object, no prose and no code fence, "
        f"that matches this JSON Schema:\n{schema}"
    )


def final_tool(request: ModelRequest) -> dict[str, Any]:
    """The final-answer function, its parameters the output's schema.

    Raises:
        ConfigurationError: one of the request's tools has its name.
    """
    output = request.output
    assert output is not None
    if any(t.name == output.tool for t in request.tools):
        raise ConfigurationError(
            f"a tool is named {output.tool!r}, the name of the final-answer tool; rename it"
        )
    function = {"name": output.tool, "description": FINAL_TOOL_DESCRIPTION}
    return {"type": "function", "function": {**function, "parameters": output.schema}}


def final_choice(request: ModelRequest) -> str | dict[str, Any]:
    """The model must call a tool (the final-answer one, or a real one to go on with); with
    no other tool to call (none offered, or "none" asked), the final-answer one."""
    assert request.output is not None
    choice = request.tool_choice
    if choice == "none" or (choice == "auto" and not request.tools):
        return {"type": "function", "function": {"name": request.output.tool}}
    if choice == "auto":
        return "required"
    return tool_choice_to_wire(choice)


def messages_to_wire(
    system: str, messages: list[Message], echo: Callable[[ToolCall], str]
) -> list[dict[str, Any]]:
    """System first; assistant turns as returned; one `tool` message per result, in order,
    then the turn's text as a user message. Thinking blocks (another provider's) are left
    out: Chat Completions has no place for them.

    An assistant turn always carries a string `content`, `""` beside tool calls:
    llama-cpp-python's server refuses both `null` and a missing key, and OpenAI, vLLM and
    Ollama accept `""`."""
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        text = "\n\n".join(b.text for b in m.content if type(b) is Text and b.text)
        if m.role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": text}
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
