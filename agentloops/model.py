"""The model boundary: one request record, one response record, one Protocol.

Every provider (Claude, an OpenAI-compatible server, a test fake) implements
`ModelClient.complete`. Loops never see a provider's wire format.

Rule: the vocabulary below it (messages, events, usage) and nothing above: no tool, provider
or loop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from agentloops.events import ModelAttempt as ModelAttempt  # what a response lists
from agentloops.messages import Message, RedactedThinking, Text, Thinking, ToolCall, ToolResult
from agentloops.usage import Usage as Usage  # re-exported: it was defined here first

if TYPE_CHECKING:
    from agentloops.events import Delta

StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "refusal",
    "pause_turn",
    "stop_sequence",
    "context_window",
]


AnswerStop = Literal["answered", "refused", "max_tokens", "context_window"]


def answer_stop(stop_reason: str) -> AnswerStop:
    """How a run ended when the model's final answer stopped with `stop_reason`."""
    if stop_reason == "refusal":
        return "refused"
    if stop_reason == "max_tokens":
        return "max_tokens"
    if stop_reason == "context_window":
        return "context_window"
    return "answered"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about one tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


OUTPUT_TOOL = "final_answer"
"""The default name of the final-answer tool a client may offer for structured output."""


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """Answer with JSON matching this JSON Schema.

    A client obtains it the way its provider accepts: native JSON-schema output, a prompt,
    or a final-answer tool named `tool` offered next to the request's own tools (whose
    arguments are then the answer). The schema's root is an object.
    """

    name: str
    schema: dict[str, Any]
    _: KW_ONLY
    tool: str = OUTPUT_TOOL
    """The name a final-answer tool gets, when a client uses one; never one of the
    request's own tools."""


ToolChoice = str
"""`"auto"`, `"none"`, `"any"`, or the name of one tool the model must call."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to the model: `system` and `messages` by position, the rest by keyword.

    `messages` is the loop's live transcript: loops only ever append to it, so a
    client that keeps a request beyond `complete` should copy the list.
    """

    system: str
    messages: list[Message]
    _: KW_ONLY
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    max_tokens: int | None = None
    output: OutputSchema | None = None
    timeout: float | None = None
    """Seconds this call may take at most, retries and their waits included: what is left
    of a run's `deadline`. `None`: the client's own timeouts."""
    role: str = ""
    """What the call is for in its loop: `"react"` (a ReAct step), `"executor"` (a
    Plan-and-Execute step's ReAct call), `"planner"`, `"replanner"`, `"solver"`,
    `"reporter"`, `"router"`, `"evaluator"`; `""` for a call made outside a loop. A
    structured call's retries keep it. The one record of a call's role (its events' and
    the cost per role); a fake can branch on it, providers never send it."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What the model answered. `output` is the parsed JSON when `request.output` was set."""

    message: Message
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    """The model that answered."""
    output: Any = None
    attempts: tuple[ModelAttempt, ...] = ()
    """The models tried, and failed, before `model` answered (empty: it was the first)."""
    usage_reported: bool = True
    """False when the provider's reply left out its token counts (an Anthropic stream's
    `message_delta` without `usage`): `usage` then holds only what it did say (zero, or
    the stream's opening counts), so a cost or budget built on it counts too little."""


@runtime_checkable
class ModelClient(Protocol):
    """Anything that can answer a `ModelRequest`.

    A client decides how to obtain structured output (native JSON-schema output, a
    forced tool, or a prompt) and must pick a mechanism the provider accepts in its
    current configuration.
    """

    def complete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class AsyncModelClient(Protocol):
    """A client with a native async call; `arun` awaits it (a sync-only client runs in a
    worker thread instead)."""

    async def acomplete(self, request: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class StreamingModelClient(Protocol):
    """A client that streams: deltas (`TextDelta`, `ThinkingDelta`, `ToolCallDelta`) as
    they arrive, then exactly one final `ModelResponse`, the same one `complete` returns.

    A stream cut off before its final response raises `ModelError`; closing the iterator
    early abandons the call.
    """

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]: ...


@runtime_checkable
class AsyncStreamingModelClient(Protocol):
    """The async form of `StreamingModelClient`."""

    def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]: ...


# -- token counts before the call ------------------------------------------------------

CHARS_PER_TOKEN = 4.0
"""The estimate's rate: about four characters a token for English prose and JSON alike
with the usual tokenizers (a local model's small vocabulary may need fewer a token; the
estimate's margin, and `Compaction`'s calibration on the counts a server reports, cover
that)."""
ESTIMATE_MARGIN = 1.1
"""The estimate is this much more than the characters alone say: it should err high."""
MESSAGE_OVERHEAD = 4
"""Tokens a chat template spends around each message (role markers, separators)."""
TOOL_OVERHEAD = 8
"""Tokens a provider spends around each tool it describes to the model."""


@runtime_checkable
class TokenCountingClient(Protocol):
    """A client that can say how many input tokens a request comes to, before sending it
    (Anthropic's count-tokens endpoint, a local server's tokenizer). Optional: callers use
    `count_tokens(client, request)`, which falls back to `estimate_tokens`."""

    def count_tokens(self, request: ModelRequest) -> int: ...


def message_chars(message: Message) -> int:
    """The characters of one message the model reads: text, tool calls (name and JSON
    arguments), tool results and thinking (its text; a redacted block's data)."""
    chars = 0
    for b in message.content:
        kind = type(b)
        if kind is Text or kind is Thinking:
            chars += len(b.text)  # type: ignore[union-attr]
        elif kind is ToolCall:
            chars += len(b.name) + len(repr(b.args))  # type: ignore[union-attr]  # ~ its JSON
        elif kind is ToolResult:
            chars += len(b.call_id) + len(b.content)  # type: ignore[union-attr]
        elif kind is RedactedThinking:
            chars += len(b.data) // 4  # type: ignore[union-attr]  # encrypted: longer than it reads
    return chars


def chars_to_tokens(chars: int) -> int:
    """The estimate for `chars` characters: `ceil(chars / CHARS_PER_TOKEN * ESTIMATE_MARGIN)`."""
    return -(-int(chars * ESTIMATE_MARGIN) // int(CHARS_PER_TOKEN))


def estimate_message_tokens(message: Message) -> int:
    """The estimate for one message, its template overhead included."""
    return chars_to_tokens(message_chars(message)) + MESSAGE_OVERHEAD


def estimate_frame_tokens(request: ModelRequest) -> int:
    """The estimate for what a request sends besides its messages: the system prompt, the
    tools (name, description, JSON Schema) and an output schema."""
    chars = len(request.system)
    for t in request.tools:
        chars += len(t.name) + len(t.description) + len(json.dumps(t.input_schema))
    if request.output is not None:
        chars += len(json.dumps(request.output.schema))
    return chars_to_tokens(chars) + TOOL_OVERHEAD * len(request.tools) + MESSAGE_OVERHEAD


def estimate_tokens(request: ModelRequest) -> int:
    """The input tokens a request comes to, estimated without a tokenizer: every character
    the model reads (system prompt, messages, tools) at `CHARS_PER_TOKEN`, times
    `ESTIMATE_MARGIN`, rounded up, plus a template's overhead per message and per tool.

    Examples:
        >>> estimate_tokens(ModelRequest("Be brief.", [Message.user("What is 2 + 2?")]))
        15
    """
    total = estimate_frame_tokens(request)
    for m in request.messages:
        total += estimate_message_tokens(m)
    return total


def count_tokens(client: object, request: ModelRequest) -> int:
    """The input tokens `request` comes to: the client's own count (`client.count_tokens`)
    when it has one, else `estimate_tokens(request)`."""
    counter = getattr(client, "count_tokens", None)
    if counter is None:
        return estimate_tokens(request)
    counted: int = counter(request)
    return counted


async def acount_tokens(client: object, request: ModelRequest) -> int:
    """`count_tokens` with the client's `acount_tokens` when it has one (else its
    `count_tokens`, then the estimate)."""
    counter = getattr(client, "acount_tokens", None)
    if counter is None:
        return count_tokens(client, request)
    counted: int = await counter(request)
    return counted
