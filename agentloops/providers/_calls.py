"""Calling any `ModelClient` the way a caller wants (async, streamed) whichever ways it
has: for the clients that wrap others (`FallbackModel`, `RateLimiter`).

Rule: it only calls; no retries, no limits, no state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

from agentloops.events import Delta
from agentloops.model import ModelClient, ModelRequest, ModelResponse


async def acomplete(client: ModelClient, request: ModelRequest) -> ModelResponse:
    """`client.acomplete`, or `client.complete` in a worker thread."""
    native: Any = getattr(client, "acomplete", None)
    if native is not None:
        response: ModelResponse = await native(request)
        return response
    return await asyncio.to_thread(client.complete, request)


def parts(client: ModelClient, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
    """`client.stream`, or `client.complete`'s one response as a stream."""
    native: Any = getattr(client, "stream", None)
    if native is not None:
        streamed: Iterator[Delta | ModelResponse] = native(request)
        return streamed
    return iter([client.complete(request)])


def aparts(client: ModelClient, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
    """`client.astream`, or `acomplete`'s one response as a stream."""
    native: Any = getattr(client, "astream", None)
    if native is not None:
        streamed: AsyncIterator[Delta | ModelResponse] = native(request)
        return streamed
    return _one(client, request)


async def _one(client: ModelClient, request: ModelRequest) -> AsyncIterator[ModelResponse]:
    yield await acomplete(client, request)


def close(items: object) -> None:
    """Close a stream that has a `close` (a generator); a plain iterator has none."""
    closer = getattr(items, "close", None)
    if closer is not None:
        closer()


async def aclose(items: object) -> None:
    closer = getattr(items, "aclose", None)
    if closer is not None:
        await closer()
