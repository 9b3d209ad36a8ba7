"""Claude through the official `anthropic` SDK: the `ModelClient` for the Messages API.

The SDK is imported when an `AnthropicModel` is built, never at `import agentloops`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal

from agentloops.errors import ConfigurationError, ModelError
from agentloops.messages import (
    Block,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
)
from agentloops.model import ModelRequest, ModelResponse, StopReason, Usage
from agentloops.structured import parse_json

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import ContentBlock
    from anthropic.types import Message as WireMessage
    from anthropic.types import Usage as WireUsage

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    "model_context_window_exceeded": "context_window",
}
_MAX_CONTINUATIONS = 5
"""`pause_turn` continuations per `complete` call before the pause is handed to the loop."""
_NONSTREAMING_MAX_TOKENS = 21_333
"""Above this `messages.create` refuses to send (its 10-minute budget: 3600 s * n / 128k)."""
_MARKABLE = frozenset({"text", "tool_result", "tool_use"})
"""Block types that may carry `cache_control` (thinking blocks may not)."""


class AnthropicModel:
    """A `ModelClient` for Claude over the `anthropic` SDK.

    Args:
        model: the model id.
        client: an `anthropic.Anthropic` client; `None` builds one from the environment
            (`ANTHROPIC_API_KEY`). Retries and timeouts are the client's (`max_retries`).
        max_tokens: output limit when the request does not set one. Above the SDK's
            non-streaming limit (about 21k) the call streams under the hood.
        thinking: `"adaptive"` (Claude decides how much to think), `None` (no thinking
            param), or a raw `thinking` dict passed through as is.
        cache: set prompt-cache breakpoints on system + tools and on the newest message.

    Examples:
        >>> from agentloops import AnthropicModel, ReActLoop
        >>> loop = ReActLoop(AnthropicModel(), [search])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = "claude-sonnet-5",
        *,
        client: anthropic.Anthropic | None = None,
        max_tokens: int = 4096,
        thinking: Literal["adaptive"] | dict[str, Any] | None = "adaptive",
        cache: bool = True,
    ):
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens}")
        if thinking == "adaptive":
            thinking = {"type": "adaptive"}
        elif thinking is not None and not (isinstance(thinking, dict) and "type" in thinking):
            raise ConfigurationError(
                f'thinking must be "adaptive", None or a thinking dict, got {thinking!r}'
            )
        import anthropic  # here, not at module top: importing agentloops must stay SDK-free
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS

        self._sdk = anthropic
        self.client = client if client is not None else anthropic.Anthropic()
        self.model = model
        self.max_tokens = max_tokens
        self.thinking: dict[str, Any] | None = thinking
        self.cache = cache
        self._stream_above = min(
            _NONSTREAMING_MAX_TOKENS, MODEL_NONSTREAMING_TOKENS.get(model, _NONSTREAMING_MAX_TOKENS)
        )
        self._local = threading.local()  # one conversion cache per thread: no lock, no mixing

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, thinking={self.thinking!r}, cache={self.cache})"

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send `request` and return Claude's turn, continuing `pause_turn` pauses.

        Raises:
            ConfigurationError: a request the API would reject (before any HTTP call).
            ModelError: the API failed after the SDK's retries, or answered with an
                unknown stop reason. `.status` and `.request_id` are set when known.
        """
        params = self._params(request)
        wire = self._send(params)
        content, usage = list(wire.content), _usage(wire.usage)
        for _ in range(_MAX_CONTINUATIONS):
            if wire.stop_reason != "pause_turn":
                break
            # The API continues a paused turn when it gets the turn back as the last message.
            paused = {"role": "assistant", "content": [b for b in content if _keep(b)]}
            wire = self._send({**params, "messages": [*params["messages"], paused]})
            content += wire.content
            usage += _usage(wire.usage)
        stop_reason = _STOP_REASONS.get(wire.stop_reason or "")
        if stop_reason is None:
            raise ModelError(
                f"Anthropic API returned an unknown stop_reason {wire.stop_reason!r}",
                request_id=getattr(wire, "_request_id", None),
            )
        message = Message("assistant", _blocks(content))
        output = None
        if request.output is not None and stop_reason != "refusal":
            output = parse_json(message.text)
        return ModelResponse(message, stop_reason, usage, wire.model, output)

    # -- request -------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": self._messages(request.messages),
        }
        if request.system:
            system: dict[str, Any] = {"type": "text", "text": request.system}
            if self.cache:
                system["cache_control"] = {"type": "ephemeral"}
            params["system"] = [system]
        if request.tools:
            tools = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
            if self.cache:
                tools[-1] = {**tools[-1], "cache_control": {"type": "ephemeral"}}
            params["tools"] = tools
            params["tool_choice"] = self._tool_choice(request)
        elif request.tool_choice not in ("auto", "none"):
            raise ConfigurationError(
                f"tool_choice={request.tool_choice!r} forces a tool, but no tools were offered"
            )
        if self.thinking is not None:
            params["thinking"] = self.thinking
        if request.output is not None:
            # The API accepts a subset of JSON Schema; the SDK's own transform (the one
            # `messages.parse` uses) closes objects and moves unsupported keywords into
            # descriptions. Validation stays with agentloops.structured.
            schema = self._sdk.transform_schema(request.output.schema)
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return params

    def _tool_choice(self, request: ModelRequest) -> dict[str, Any]:
        choice = request.tool_choice
        if choice in ("auto", "any", "none"):
            mapped: dict[str, Any] = {"type": choice}
        elif any(t.name == choice for t in request.tools):
            mapped = {"type": "tool", "name": choice}
        else:
            names = [t.name for t in request.tools]
            raise ConfigurationError(
                f"tool_choice={choice!r} names no offered tool; tools: {names}"
            )
        if mapped["type"] in ("any", "tool") and (self.thinking or {}).get("type") == "enabled":
            raise ConfigurationError(
                f"tool_choice={choice!r} forces tool use, which the API rejects with manual "
                'thinking ({"type": "enabled"}); use thinking="adaptive" or tool_choice="auto"'
            )
        return mapped

    def _messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        """The wire form of `messages`, converting only what was appended since last call."""
        wire: _Wire | None = getattr(self._local, "wire", None)
        if wire is None or not wire.extends(messages):
            wire = self._local.wire = _Wire(messages)
        return wire.sync(messages, self.cache)

    def _send(self, params: dict[str, Any]) -> WireMessage:
        sdk = self._sdk
        try:
            if params["max_tokens"] > self._stream_above:
                with self.client.messages.stream(**params) as stream:
                    return stream.get_final_message()
            created: WireMessage = self.client.messages.create(**params)
            return created
        except sdk.APIStatusError as exc:
            detail = exc.api_message or exc.message
            raise ModelError(
                f"Anthropic API error {exc.status_code} ({exc.type or 'unknown'}): {detail}",
                request_id=exc.request_id,
                status=exc.status_code,
            ) from exc
        except sdk.AnthropicError as exc:  # connection errors, timeouts, malformed responses
            raise ModelError(f"Anthropic API call failed: {type(exc).__name__}: {exc}") from exc


class _Wire:
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
            marked = {**tail, "cache_control": {"type": "ephemeral"}}
            self.unmarked = (len(params) - 1, newest)
            params[-1] = {**newest, "content": [*head, marked]}
        return params


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


def _keep(block: ContentBlock) -> bool:
    return block.type != "text" or bool(block.text.strip())


def _blocks(content: list[ContentBlock]) -> tuple[Block, ...]:
    """Our blocks for the API's. Server-tool blocks (web search, code execution) are left
    out: agentloops never offers server tools, and a loop could not answer them."""
    blocks: list[Block] = []
    for b in filter(_keep, content):
        if b.type == "text":
            blocks.append(Text(b.text))
        elif b.type == "thinking":
            blocks.append(Thinking(b.thinking, b.signature))
        elif b.type == "redacted_thinking":
            blocks.append(RedactedThinking(b.data))
        elif b.type == "tool_use":
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
