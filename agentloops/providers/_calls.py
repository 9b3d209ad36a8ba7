"""Calling any `ModelClient` the way a caller wants (async, streamed) whichever ways it
has: for the clients that wrap others (`FallbackModel`, `RateLimiter`).

Rule: it only calls; no retries, no rate limits, no state. A sync-only client called from
asyncio runs on agentloops' pool (`agentloops._pool`), never the event loop's default
executor, and is waited for at most `model_timeout` (`agentloops.configure_threads`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from agentloops import _pool
from agentloops.errors import ModelError
from agentloops.events import Delta
from agentloops.model import ModelClient, ModelRequest, ModelResponse
from agentloops.threads import settings


async def acomplete(client: ModelClient, request: ModelRequest) -> ModelResponse:
    """`client.acomplete`, or `client.complete` on agentloops' pool (`in_thread`)."""
    native: Any = getattr(client, "acomplete", None)
    if native is not None:
        response: ModelResponse = await native(request)
        return response
    return await in_thread(client, request)


async def in_thread(client: Any, request: ModelRequest) -> ModelResponse:
    """A sync-only client's `complete` on agentloops' pool, waited for at most the
    `model_timeout` of `agentloops.configure_threads`, or the request's own `timeout` (what
    is left of the run's deadline) when that is sooner; the thread is then abandoned."""
    timeout = settings().model_timeout
    why = "the model_timeout of agentloops.configure_threads"
    if request.timeout is not None and request.timeout < timeout:
        timeout, why = request.timeout, "the request's timeout: what was left of the deadline"
    try:
        response: ModelResponse = await _pool.call(client.complete, request, timeout=timeout)
    except _pool.Late:
        raise ModelError(
            f"{type(client).__name__}.complete did not answer within {timeout:g} s ({why}); "
            "the call was abandoned",
            kind="timeout",
        ) from None
    return response


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
