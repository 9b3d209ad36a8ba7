"""The model boundary: one request record, one response record, one Protocol.

Every provider (Claude, an OpenAI-compatible server, a test fake) implements
`ModelClient.complete`. Loops never see a provider's wire format.

Rule: the vocabulary below it (messages, events, usage) and nothing above: no tool, provider
or loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from agentloops.events import ModelAttempt as ModelAttempt  # what a response lists
from agentloops.messages import Message
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
