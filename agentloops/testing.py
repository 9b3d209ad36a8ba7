"""Test doubles for agents: a scripted model, a function model, and response builders.

Both fakes check every request against the Anthropic transcript rules, so any test
that drives a loop through them is also a protocol test. They also check that the
assistant turns they returned come back unaltered (thinking blocks included).

Examples:
    >>> from agentloops import ReActLoop, tool
    >>> from agentloops.testing import ScriptedModel, use_tools
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> model = ScriptedModel([use_tools(("add", {"a": 2, "b": 3})), "5"])
    >>> ReActLoop(model, [add]).run("What is 2 + 3?").answer
    '5'

Rule: a kit; test doubles know the model boundary and the vocabulary, and no loop or driver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from agentloops.errors import AgentLoopsError, ConfigurationError, TranscriptError
from agentloops.events import Delta, TextDelta, ThinkingDelta, ToolCallDelta
from agentloops.messages import (
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    validate_transcript,
)
from agentloops.model import ModelRequest, ModelResponse, StopReason
from agentloops.usage import Usage

__all__ = [
    "FunctionModel",
    "ScriptExhausted",
    "ScriptedModel",
    "deltas",
    "respond",
    "respond_structured",
    "use_tools",
    "validate_transcript",
]

_ids = itertools.count(1)
_PROCESS = os.urandom(4).hex()
"""This process's part of the ids `use_tools` makes: a durable run resumed in another
process, with a fresh fake, gets ids its journal's turns never used."""

ScriptItem = (
    ModelResponse
    | str
    | Exception
    | Callable[[ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]]
)


class ScriptExhausted(AgentLoopsError, AssertionError):
    """The scripted model was called more often than its script allows."""


def respond(
    text: str,
    *,
    usage: Usage | None = None,
    stop_reason: StopReason = "end_turn",
    thinking: Thinking | RedactedThinking | None = None,
) -> ModelResponse:
    """A plain text answer."""
    blocks = (thinking, Text(text)) if thinking else (Text(text),)
    return ModelResponse(Message("assistant", blocks), stop_reason, usage or Usage(), "scripted")


def use_tools(
    *calls: ToolCall | tuple[str, dict[str, Any]],
    text: str | None = None,
    usage: Usage | None = None,
    thinking: Thinking | RedactedThinking | None = None,
    stop_reason: StopReason = "tool_use",
) -> ModelResponse:
    """A turn that calls tools; `(name, args)` tuples get fresh ids, unique across
    processes (`toolu_scripted_<process>_<n>`)."""
    blocks: list[Any] = [thinking] if thinking else []
    if text:
        blocks.append(Text(text))
    for call in calls:
        if isinstance(call, ToolCall):
            blocks.append(call)
        else:
            name, args = call
            blocks.append(ToolCall(f"toolu_scripted_{_PROCESS}_{next(_ids)}", name, dict(args)))
    return ModelResponse(
        Message("assistant", tuple(blocks)), stop_reason, usage or Usage(), "scripted"
    )


def respond_structured(data: Any, *, usage: Usage | None = None) -> ModelResponse:
    """A structured answer: `.output` is `data` (a dict, or a pydantic model's dump)."""
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    message = Message("assistant", (Text(json.dumps(data)),))
    return ModelResponse(message, "end_turn", usage or Usage(), "scripted", output=data)


class FunctionModel:
    """A `ModelClient` whose answers come from `fn(request)`, a plain or an `async` function.

    Records every request in `.requests` (with a copy of its messages) and, unless
    `validate=False`, raises `TranscriptError` for a request the API would reject.
    It works under every driver: `complete`, `acomplete`, and `stream`/`astream`, which
    hand out the reply in deltas of `chunk` characters (text, thinking, and each tool
    call's arguments JSON) before the final `ModelResponse`. Thread-safe.
    """

    def __init__(
        self,
        fn: Callable[[ModelRequest], ModelResponse | str | Awaitable[ModelResponse | str]],
        *,
        validate: bool = True,
        chunk: int = 8,
    ):
        if chunk < 1:
            raise ConfigurationError(f"chunk must be >= 1, got {chunk}")
        self.fn = fn
        self.validate = validate
        self.chunk = chunk
        self.requests: list[ModelRequest] = []
        self._lock = threading.Lock()
        self._returned: dict[str, Message | None] = {}

    def complete(self, request: ModelRequest) -> ModelResponse:
        answer = self._ask(request)
        if inspect.isawaitable(answer):
            answer = _run_coroutine(answer)
        return self._answered(answer)

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        answer = self._ask(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return self._answered(answer)

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        response = self.complete(request)
        yield from deltas(response, self.chunk)
        yield response

    async def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        response = await self.acomplete(request)
        for delta in deltas(response, self.chunk):
            yield delta
        yield response

    @property
    def calls(self) -> int:
        """How many requests were made."""
        return len(self.requests)

    def _ask(self, request: ModelRequest) -> Any:
        if self.validate:
            self._check(request)
        with self._lock:
            self.requests.append(dataclasses.replace(request, messages=list(request.messages)))
        return self.fn(request)

    def _answered(self, answer: ModelResponse | str) -> ModelResponse:
        response = respond(answer) if isinstance(answer, str) else answer
        self._remember(response.message)
        return response

    def _check(self, request: ModelRequest) -> None:
        validate_transcript(request.messages)
        for i, m in enumerate(request.messages):
            if m.role != "assistant":
                continue
            for key in _keys(m):
                original = self._returned.get(key)
                if original is not None and original != m:
                    raise TranscriptError(
                        f"message {i}: an assistant turn was altered or lost blocks "
                        "before being sent back (thinking must be echoed unchanged)"
                    )

    def _remember(self, message: Message) -> None:
        ids = [c.id for c in message.tool_calls]
        malformed = len(ids) != len(set(ids))  # the loop will repair it: nothing to compare
        with self._lock:
            for key in _keys(message):
                # A key seen before (an id the model reused) is ambiguous: stop comparing it.
                known = malformed or key in self._returned
                self._returned[key] = None if known else message


def deltas(response: ModelResponse, chunk: int = 8) -> Iterator[Delta]:
    """The deltas a streaming provider would send before `response`, in `chunk`-sized
    pieces: each text and thinking block, and each tool call (id and name first, then
    its arguments' JSON)."""
    index = 0
    for block in response.message.content:
        if type(block) is Text:
            for i in range(0, len(block.text), chunk):
                yield TextDelta(text=block.text[i : i + chunk])
        elif type(block) is Thinking:
            for i in range(0, len(block.text), chunk):
                yield ThinkingDelta(text=block.text[i : i + chunk])
        elif type(block) is ToolCall:
            arguments = json.dumps(block.args)
            yield ToolCallDelta(index=index, call_id=block.id, name=block.name)
            for i in range(0, len(arguments), chunk):
                yield ToolCallDelta(index=index, arguments=arguments[i : i + chunk])
            index += 1


def _run_coroutine(answer: Awaitable[Any]) -> Any:
    """Finish an async answer from sync code (`complete` on a thread with no running loop)."""

    async def wait() -> Any:
        return await answer

    return asyncio.run(wait())


def _keys(message: Message) -> list[str]:
    keys = []
    for b in message.content:
        if type(b) is ToolCall:
            keys.append("call:" + b.id)
        elif type(b) is Thinking:
            keys.append("sig:" + b.signature)
        elif type(b) is RedactedThinking:
            keys.append("red:" + b.data)
    return keys


class ScriptedModel(FunctionModel):
    """A `ModelClient` that answers from a script, one item per call.

    Items: a `ModelResponse`; a `str` (a plain text answer); an `Exception` (raised);
    or a callable taking the request and returning either (it may be `async`). Items are
    checked when the model is built. Raises `ScriptExhausted`, naming the call and what
    it asked, when called once too often; `assert_complete()` checks every item was used.
    """

    def __init__(self, script: list[ScriptItem], *, validate: bool = True, chunk: int = 8):
        for i, item in enumerate(script):
            if not isinstance(item, ModelResponse | str | Exception) and not callable(item):
                hint = (
                    " (for structured output, script respond_structured(...))"
                    if isinstance(item, dict | list)
                    else ""
                )
                raise ConfigurationError(
                    f"script item {i} is a {type(item).__name__}: items are ModelResponse, "
                    f"str, Exception or a callable taking the request{hint}"
                )
        super().__init__(self._next, validate=validate, chunk=chunk)
        self.script = list(script)
        self._position = 0

    def _next(self, request: ModelRequest) -> Any:
        with self._lock:
            if self._position >= len(self.script):
                raise ScriptExhausted(
                    f"the script has {len(self.script)} items and all were used; call "
                    f"{self._position + 1} was not expected. It asked: {_summary(request)}"
                )
            item = self.script[self._position]
            self._position += 1
        if isinstance(item, Exception):
            raise item
        if callable(item):
            return item(request)
        return item

    @property
    def remaining(self) -> int:
        """Items not used yet."""
        return len(self.script) - self._position

    def assert_complete(self) -> None:
        """Raise `AssertionError` unless every scripted item was used."""
        if self.remaining:
            raise AssertionError(
                f"{self.remaining} of {len(self.script)} scripted responses were never used"
            )


def _summary(request: ModelRequest) -> str:
    """A short account of a request, for a test failure message."""
    last = request.messages[-1] if request.messages else None
    said = ""
    if last is not None:
        text = last.text or "; ".join(f"result for {r.call_id}" for r in last.tool_results)
        said = f"{last.role} turn {text[:120]!r}"
    system = request.system.splitlines()[0][:80] if request.system else ""
    parts = [f"{len(request.messages)} messages, the last a {said}" if said else "no messages"]
    if system:
        parts.append(f"system {system!r}")
    if request.output is not None:
        parts.append(f"structured output {request.output.name}")
    if request.tools:
        parts.append(f"tools {[t.name for t in request.tools]}")
    return "; ".join(parts)
