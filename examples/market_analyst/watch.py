"""Each model call as it happens, told to whoever counts or shows it, naming its role.

`Watched(client, listener)` wraps one client: before each call the listener hears
`CallStarted`, then (with `stream=True`, on a client that can stream) each piece the
model writes as `CallText`, then `CallFinished` with the response and the seconds it
took. The role comes from the request (`roles.role_of`): the loops' own events name only
the loop (a ReWOO run's planner and solver both say "rewoo"), so whatever shows a model
call by role listens here. The usage meter, the command line's live lines and the web
app's feed are the listeners. A call that raises is heard of no further: its run's error
says what happened.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

from agentloops import (
    ModelClient,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
)
from agentloops.events import Delta
from market_analyst.roles import role_of

Part = Literal["text", "thinking", "tool_call"]


@dataclass(frozen=True)
class CallStarted:
    role: str


@dataclass(frozen=True)
class CallText:
    role: str
    part: Part
    """"text" the reply, "thinking" visible reasoning, "tool_call" a call's name and
    arguments as they are written."""
    text: str


@dataclass(frozen=True)
class CallFinished:
    role: str
    response: ModelResponse
    seconds: float


Note = CallStarted | CallText | CallFinished
Listener = Callable[[Note], None]


class Watched:
    """`model`, with every call told to `listener` (from the thread that makes the call).

    `stream`: `acomplete` goes through the client's `astream` when it has one, and each
    delta is heard as `CallText`; the response is the one `acomplete` would return.
    """

    def __init__(self, model: ModelClient, listener: Listener, *, stream: bool = False):
        self.model, self.listener, self.stream = model, listener, stream

    def complete(self, request: ModelRequest) -> ModelResponse:
        role = role_of(request)
        self.listener(CallStarted(role))
        start = time.perf_counter()
        response = self.model.complete(request)
        self.listener(CallFinished(role, response, time.perf_counter() - start))
        return response

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """The client's `astream` (with `stream`) or `acomplete`, else `complete` in a
        thread, as the asyncio driver would call it unwrapped."""
        role = role_of(request)
        self.listener(CallStarted(role))
        start = time.perf_counter()
        astream = getattr(self.model, "astream", None) if self.stream else None
        acomplete = getattr(self.model, "acomplete", None)
        if astream is not None:
            response = await self._streamed(astream(request), role)
        elif acomplete is not None:
            response = await acomplete(request)
        else:
            response = await asyncio.to_thread(self.model.complete, request)
        self.listener(CallFinished(role, response, time.perf_counter() - start))
        return response

    async def _streamed(
        self, parts: AsyncIterator[Delta | ModelResponse], role: str
    ) -> ModelResponse:
        try:
            async for part in parts:
                if isinstance(part, ModelResponse):
                    return part
                self.listener(CallText(role, *_piece(part)))
        finally:
            aclose = getattr(parts, "aclose", None)  # an async generator's
            if aclose is not None:
                await aclose()
        raise ModelError(f"{type(self.model).__name__}.astream ended without a final response")


def _piece(delta: Delta) -> tuple[Part, str]:
    if isinstance(delta, TextDelta):
        return "text", delta.text
    if isinstance(delta, ThinkingDelta):
        return "thinking", delta.text
    # A tool call's first delta names it; the others carry its arguments' JSON.
    return "tool_call", f"{delta.name} " if delta.name else delta.arguments
