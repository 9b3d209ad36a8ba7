"""`RateLimiter`: one API key's limits, shared by every run in the process (threads and
event loops alike), and optionally by every process through a PostgreSQL run store.

It wraps any client and waits, never fails, when a limit is reached: at most
`requests_per_minute` calls started in any window, at most `tokens_per_minute` tokens
spent by the calls that finished in it, at most `max_concurrent` calls in flight. A
`ModelError` of kind "rate_limited" from the client (the provider's 429, after the
client's own retries) pauses every caller until its `Retry-After` has passed and is
tried again. The accounting is one lock over a few counters, with an injectable clock,
so the same limiter serves sync and async callers and tests drive it on a fake clock.

Rule: it knows no loop and no provider; its lock is never held while anyone waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Protocol

from agentloops import _pool
from agentloops.errors import ConfigurationError, ModelError, check_limits
from agentloops.events import Delta
from agentloops.model import ModelClient, ModelRequest, ModelResponse
from agentloops.providers import _calls as calls
from agentloops.usage import Price

__all__ = ["RateLimiter", "SharedWindow"]


class SharedWindow(Protocol):
    """Counts shared by several processes (`PostgresStore.rate_window(name)`): `admit`
    starts a call if the window allows it, else says how long to wait; `spend` adds a
    finished call's tokens."""

    def admit(self, requests: int | None, tokens: int | None, window: float) -> float: ...
    def spend(self, tokens: int) -> None: ...


class _Budget:
    """The limits' state, under one lock that is never held while anyone waits."""

    def __init__(
        self,
        requests: int | None,
        tokens: int | None,
        concurrent: int | None,
        window: float,
        clock: Callable[[], float],
        shared: SharedWindow | None,
    ):
        self.requests, self.tokens, self.concurrent = requests, tokens, concurrent
        self.window, self.clock, self.shared = window, clock, shared
        self.lock = threading.Lock()
        self.started: deque[float] = deque()
        """When each call in the window started (the requests limit)."""
        self.spent: deque[tuple[float, int]] = deque()
        """When each call in the window finished, and its tokens (the tokens limit)."""
        self.spent_total = 0
        self.running = 0
        self.paused_until = 0.0
        self.waiters: list[Callable[[], None]] = []
        """Wake-ups of callers waiting for a free place (`max_concurrent`)."""

    def take(self) -> float | None:
        """Start a call now (`0.0`), or the seconds to wait before asking again (`None`:
        until a call in flight finishes)."""
        with self.lock:
            now = self.clock()
            if now < self.paused_until:
                return self.paused_until - now
            if self.concurrent is not None and self.running >= self.concurrent:
                return None
            cutoff = now - self.window
            started, spent = self.started, self.spent
            while started and started[0] <= cutoff:
                started.popleft()
            while spent and spent[0][0] <= cutoff:
                self.spent_total -= spent.popleft()[1]
            waits = [0.0]
            if self.requests is not None and len(started) >= self.requests:
                waits.append(started[0] + self.window - now)
            if self.tokens is not None and self.spent_total >= self.tokens:
                waits.append(self._tokens_free_at(cutoff) + self.window - now)
            wait = max(waits)
            if wait > 0:
                return wait
            if self.shared is not None:
                shared_wait = self.shared.admit(self.requests, self.tokens, self.window)
                if shared_wait > 0:
                    return shared_wait
            started.append(now)
            self.running += 1
            return 0.0

    def _tokens_free_at(self, cutoff: float) -> float:
        """When enough of the window's spending has aged out to fall under the limit."""
        assert self.tokens is not None
        total = self.spent_total
        for at, tokens in self.spent:
            total -= tokens
            if total < self.tokens:
                return at
        return cutoff  # pragma: no cover  (the window empties first)

    def done(self, tokens: int) -> None:
        with self.lock:
            self.running -= 1
            if tokens:
                self.spent.append((self.clock(), tokens))
                self.spent_total += tokens
            waiters, self.waiters = self.waiters, []
        if tokens and self.shared is not None:
            self.shared.spend(tokens)
        for wake in waiters:
            wake()

    def pause(self, seconds: float) -> None:
        with self.lock:
            self.paused_until = max(self.paused_until, self.clock() + seconds)

    def wait_for_place(self, wake: Callable[[], None]) -> bool:
        """Register `wake` for the next finished call; False if a place is free already."""
        with self.lock:
            if self.concurrent is None or self.running < self.concurrent:
                return False
            self.waiters.append(wake)
            return True


class RateLimiter:
    """A client that keeps the calls of every run that uses it within one API key's limits.

    Args:
        client: the client to limit (any `ModelClient`).
        requests_per_minute: calls that may start in any window (`None`: no limit).
        tokens_per_minute: tokens (input of every kind and output, from each reply's
            usage) the calls finished in any window may spend before the next starts.
            A call's tokens are counted when it finishes, so calls in flight can take a
            window past the limit by what they spend; `max_concurrent` bounds that.
        max_concurrent: calls in flight at once (this process only).
        window: the length of the "minute", in seconds (60).
        max_rate_limited: how many times a call the provider refused with a 429 (after
            the client's own retries) waits out its `Retry-After` and is sent again
            before the error is raised.
        store: a `PostgresStore` whose database shares the requests and tokens limits
            with every process that names the same limiter `name` there.
        name: the limiter's key in the shared table (one per API key).
        clock: seconds, monotonic (tests pass a fake; with `store`, the database's
            clock decides the shared limits instead).
        sleep: how to wait, on a thread (`time.sleep`).
        async_sleep: how to wait, on the event loop (`asyncio.sleep`).

    One limiter serves every thread and every event loop; share the object (or make
    another client share it with `wrap`).

    Examples:
        >>> from agentloops.testing import ScriptedModel
        >>> limited = RateLimiter(ScriptedModel(["hi"]), requests_per_minute=50)
        >>> limited
        RateLimiter(ScriptedModel, requests_per_minute=50)
    """

    def __init__(
        self,
        client: ModelClient,
        *,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        max_concurrent: int | None = None,
        window: float = 60.0,
        max_rate_limited: int = 3,
        store: Any = None,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        async_sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        _budget: _Budget | None = None,
    ):
        check_limits(
            requests_per_minute=(requests_per_minute, 1),
            tokens_per_minute=(tokens_per_minute, 1),
            max_concurrent=(max_concurrent, 1),
        )
        limits = (requests_per_minute, tokens_per_minute, max_concurrent)
        if window <= 0 or max_rate_limited < 0:
            raise ConfigurationError("window must be > 0 and max_rate_limited >= 0")
        shared: SharedWindow | None = None
        if store is not None:
            opener = getattr(store, "rate_window", None)
            if opener is None:
                raise ConfigurationError(
                    f"a {type(store).__name__} cannot share a rate limit; use a PostgresStore"
                )
            if not name:
                raise ConfigurationError("a shared limiter needs a name= (one per API key)")
            shared = opener(name)
        self.client = client
        self.model = getattr(client, "model", "")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_concurrent = max_concurrent
        self.max_rate_limited = max_rate_limited
        self._sleep, self._async_sleep = sleep, async_sleep
        self._budget = _budget or _Budget(*limits, window, clock, shared)

    def wrap(self, client: ModelClient) -> RateLimiter:
        """Another client under the same limits (two models on one API key)."""
        b = self._budget
        return RateLimiter(
            client,
            requests_per_minute=b.requests,
            tokens_per_minute=b.tokens,
            max_concurrent=b.concurrent,
            max_rate_limited=self.max_rate_limited,
            sleep=self._sleep,
            async_sleep=self._async_sleep,
            _budget=b,
        )

    def __repr__(self) -> str:
        limits = (
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
            ("max_concurrent", self.max_concurrent),
        )
        shown = "".join(f", {k}={v}" for k, v in limits if v is not None)
        return f"RateLimiter({type(self.client).__name__}{shown})"

    def prices(self) -> dict[str, Price | None]:
        from agentloops.pricing import prices_of

        return prices_of(self.client)

    @property
    def running(self) -> int:
        """Calls in flight now."""
        return self._budget.running

    # -- the four ways to call ----------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelResponse:
        """`client.complete(request)` once the limits allow; waits, never fails, for them."""
        response = None
        for item in self._limited(request, whole=True):
            response = item
        assert isinstance(response, ModelResponse)
        return response

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """`complete` on the event loop (a client without `acomplete` runs in a thread)."""
        refused = 0
        while True:
            request = await self._aenter(request)
            tokens = 0
            try:
                response = await calls.acomplete(self.client, request)
                tokens = response.usage.total_tokens
                return response
            except ModelError as exc:
                refused = self._refused(exc, refused)
            finally:
                self._budget.done(tokens)

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        """The client's stream (or its one response) once the limits allow. The call
        holds its place until the stream ends or is closed; a rate-limited failure before
        the first delta waits and is sent again, one after it is raised."""
        return self._limited(request, whole=False)

    def _limited(self, request: ModelRequest, *, whole: bool) -> Iterator[Delta | ModelResponse]:
        """The call, in a place the limits allow: `complete`'s one response when `whole`,
        else the client's stream."""
        refused, delivered = 0, False
        while True:
            request = self._enter(request)
            tokens = 0
            items: Any = None
            try:
                if whole:
                    items = iter([self.client.complete(request)])
                else:
                    items = calls.parts(self.client, request)
                for part in items:
                    if isinstance(part, ModelResponse):
                        tokens = part.usage.total_tokens
                    else:
                        delivered = True
                    yield part
                return
            except ModelError as exc:
                if delivered:
                    raise
                refused = self._refused(exc, refused)
            finally:
                calls.close(items)
                self._budget.done(tokens)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        """`stream` on the event loop."""
        refused, delivered = 0, False
        while True:
            request = await self._aenter(request)
            tokens = 0
            items: Any = None
            try:
                items = calls.aparts(self.client, request)
                async for part in items:
                    if isinstance(part, ModelResponse):
                        tokens = part.usage.total_tokens
                    else:
                        delivered = True
                    yield part
                return
            except ModelError as exc:
                if delivered:
                    raise
                refused = self._refused(exc, refused)
            finally:
                await calls.aclose(items)
                self._budget.done(tokens)

    # -- waiting ------------------------------------------------------------------------

    def _enter(self, request: ModelRequest) -> ModelRequest:
        """Wait for a place; the request, with what is left of its timeout after the wait.

        Raises:
            ModelError: (kind "timeout") the wait would outlast `request.timeout`: a run's
                deadline beats the limits.
        """
        budget = self._budget
        ends = None if request.timeout is None else budget.clock() + request.timeout
        waited = False
        while True:
            wait = budget.take()
            if wait == 0.0:
                return _left(request, ends, budget.clock()) if waited else request
            waited = True
            left = None if ends is None else ends - budget.clock()
            if wait is not None:
                if left is not None and wait >= left:
                    raise _too_long(wait, request)
                self._sleep(wait)
                continue
            freed = threading.Event()
            if budget.wait_for_place(freed.set) and not freed.wait(left):
                raise _too_long(request.timeout or 0.0, request)

    async def _aenter(self, request: ModelRequest) -> ModelRequest:
        budget = self._budget
        ends = None if request.timeout is None else budget.clock() + request.timeout
        waited = False
        while True:
            wait = await self._atake()
            if wait == 0.0:
                return _left(request, ends, budget.clock()) if waited else request
            waited = True
            left = None if ends is None else ends - budget.clock()
            if wait is not None:
                if left is not None and wait >= left:
                    raise _too_long(wait, request)
                await self._async_sleep(wait)
                continue
            freed = asyncio.get_running_loop().create_future()
            if budget.wait_for_place(_waker(freed)):
                try:
                    await asyncio.wait_for(freed, left)
                except asyncio.TimeoutError:
                    raise _too_long(request.timeout or 0.0, request) from None

    async def _atake(self) -> float | None:
        if self._budget.shared is not None:  # a database round trip: off the event loop
            return await _pool.call(self._budget.take, pool=_pool.own)  # type: ignore[no-any-return]
        return self._budget.take()

    def _refused(self, exc: ModelError, refused: int) -> int:
        """After a failure: pause everyone for a 429's `Retry-After` and say to try again,
        or raise the error."""
        if exc.kind != "rate_limited" or refused >= self.max_rate_limited:
            raise exc
        self._budget.pause(exc.retry_after if exc.retry_after is not None else 1.0)
        return refused + 1


def _waker(future: asyncio.Future[None]) -> Callable[[], None]:
    """Wake the task awaiting `future`, from any thread (a closed loop: nobody waits)."""
    loop = future.get_loop()

    def settle() -> None:
        if not future.done():
            future.set_result(None)

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # its event loop is closed
            loop.call_soon_threadsafe(settle)

    return wake


def _left(request: ModelRequest, ends: float | None, now: float) -> ModelRequest:
    """`request` with the time it waited taken off its timeout."""
    if ends is None:
        return request
    return dataclasses.replace(request, timeout=max(ends - now, 0.0))


def _too_long(wait: float, request: ModelRequest) -> ModelError:
    return ModelError(
        f"the rate limit asks to wait {wait:.1f} s, past the {request.timeout:.1f} s this "
        "call has left (the run's deadline)",
        kind="timeout",
    )
