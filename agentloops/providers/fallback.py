"""`FallbackModel`: a chain of model clients, each tried when the one before it failed in a
way the next may fix (overloaded, unavailable, timed out, rate limited past its retries,
context window too small), never when the request itself is at fault.

On a full context window (`ContextWindowExceeded`) it falls back by default, a deliberate
choice: list a model with a larger window after one with a smaller, and the request goes
to it. When the last model's window is too small as well, the error raised is a
`ContextWindowExceeded` (carrying the last model's `tokens` and `limit`), so a loop's
`Compaction` compacts and retries through the whole chain again.

It is a `ModelClient` with whichever of `acomplete`, `stream` and `astream` its members
have (a member without them is called through `complete`). Each member retries by its own
`RetryPolicy` first; the chain moves on only after that. It knows nothing of loops: the
response names the model that answered and the ones that failed before it
(`ModelResponse.attempts`), which the driver puts on `ModelCallFinished`, and a durable
run's journal records with the response, so a resumed run does not ask again.

Rule: it knows no loop and no provider: only `ModelClient`s and `ModelError.kind`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from typing import Any

from agentloops.errors import ConfigurationError, ContextWindowExceeded, ModelError
from agentloops.events import Delta
from agentloops.model import ModelAttempt, ModelClient, ModelRequest, ModelResponse
from agentloops.providers import _calls as calls
from agentloops.usage import Price

__all__ = ["DEFAULT_FALLBACK_ON", "FallbackModel"]

DEFAULT_FALLBACK_ON: frozenset[str] = frozenset(
    {"rate_limited", "overloaded", "unavailable", "timeout", "context_window"}
)
"""The `ModelError.kind`s a chain falls back on by default: failures of the provider (or
of the model's size), which another model may not share. Never "bad_request" (the
request is wrong for any model), "auth" (a key that is missing or refused: a mistake to
fix, not to hide behind another provider's bill), "not_found", "bad_reply" or "other"."""

FallbackOn = Collection[str | type[ModelError]] | Callable[[ModelError], bool]
"""Kinds (`"overloaded"`), error classes (`ContextWindowExceeded`), or a predicate."""


class FallbackModel:
    """Try each model in turn until one answers.

    Args:
        models: the clients, first choice first (at least one).
        fallback_on: which failures move on to the next model: a collection of
            `ModelError.kind`s and `ModelError` subclasses, or a function of the error
            (default `DEFAULT_FALLBACK_ON`). Any other failure is raised as it is, with
            the failures before it on its `.failures`.

    A stream falls back only when a model fails before its first delta: once deltas have
    reached the caller (printed, forwarded), another model's answer cannot be joined to
    them, so a failure mid-stream is raised.

    When every model fails, the `ModelError` lists each failure (`.failures`: name and
    error, in order) and takes its `kind` and `status` from the last.

    Examples:
        >>> from agentloops import Message
        >>> from agentloops.testing import ScriptedModel
        >>> busy = ModelError("overloaded", status=529)
        >>> chain = FallbackModel([ScriptedModel([busy]), ScriptedModel(["hello"])])
        >>> reply = chain.complete(ModelRequest("", [Message.user("hi")]))
        >>> reply.message.text, [a.kind for a in reply.attempts]
        ('hello', ['overloaded'])
    """

    def __init__(
        self, models: Sequence[ModelClient], *, fallback_on: FallbackOn = DEFAULT_FALLBACK_ON
    ):
        if not models:
            raise ConfigurationError("FallbackModel needs at least one model")
        if not callable(fallback_on):
            unknown = [k for k in fallback_on if not isinstance(k, str | type)]
            if unknown:
                raise ConfigurationError(
                    f"fallback_on takes kinds and error classes, not {unknown}"
                )
        self.models = list(models)
        self.fallback_on = fallback_on
        self.names = [_name(m) for m in self.models]
        self.model = self.names[0]
        """The first choice's name (each response names the model that answered)."""

    def __repr__(self) -> str:
        return f"FallbackModel({self.names!r})"

    def prices(self) -> dict[str, Price | None]:
        """Each member's models and prices, for a loop's `max_cost`."""
        from agentloops.pricing import prices_of

        merged: dict[str, Price | None] = {}
        for member in self.models:
            merged.update(prices_of(member))
        return merged

    # -- the four ways to call ----------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The first answer of the chain.

        Raises:
            ModelError: every model failed (`.failures`), or one failed in a way the
                chain does not fall back on.
        """
        tried = _Tried(self, request)
        for i, member in enumerate(self.models):
            started = time.perf_counter()
            try:
                return tried.answered(i, member.complete(tried.request()))
            except ModelError as exc:
                tried.failed(i, exc, started)
        raise AssertionError("unreachable")  # pragma: no cover

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """`complete` on the event loop (a member without `acomplete` runs in a thread)."""
        tried = _Tried(self, request)
        for i, member in enumerate(self.models):
            started = time.perf_counter()
            try:
                return tried.answered(i, await calls.acomplete(member, tried.request()))
            except ModelError as exc:
                tried.failed(i, exc, started)
        raise AssertionError("unreachable")  # pragma: no cover

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        """The first model's stream that gets as far as its first delta (or its response).

        Raises:
            ModelError: as `complete`; also a failure after the first delta (not
                fallen back on: see the class docstring).
        """
        tried = _Tried(self, request)
        for i, member in enumerate(self.models):
            started, delivered = time.perf_counter(), False
            items: Any = None
            try:
                items = calls.parts(member, tried.request())
                for part in items:
                    if isinstance(part, ModelResponse):
                        yield tried.answered(i, part)
                        return
                    delivered = True
                    yield part
                raise _unfinished(self.names[i])
            except ModelError as exc:
                if delivered:
                    raise
                tried.failed(i, exc, started)
            finally:
                calls.close(items)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        """`stream` on the event loop (a member without `astream` is awaited through
        `acomplete`, or run in a thread through `complete`)."""
        tried = _Tried(self, request)
        for i, member in enumerate(self.models):
            started, delivered = time.perf_counter(), False
            items: Any = None
            try:
                items = calls.aparts(member, tried.request())
                async for part in items:
                    if isinstance(part, ModelResponse):
                        yield tried.answered(i, part)
                        return
                    delivered = True
                    yield part
                raise _unfinished(self.names[i])
            except ModelError as exc:
                if delivered:
                    raise
                tried.failed(i, exc, started)
            finally:
                await calls.aclose(items)

    def falls_back(self, error: ModelError) -> bool:
        """Whether `error` moves the chain on to its next model."""
        rule = self.fallback_on
        if callable(rule):
            return bool(rule(error))
        return any(error.kind == k if isinstance(k, str) else isinstance(error, k) for k in rule)


class _Tried:
    """One call's way down the chain: the failures so far, and the time left."""

    def __init__(self, chain: FallbackModel, request: ModelRequest):
        self.chain = chain
        self.original = request
        self.ends = None if request.timeout is None else time.monotonic() + request.timeout
        self.failures: list[tuple[str, ModelError]] = []
        self.attempts: list[ModelAttempt] = []

    def request(self) -> ModelRequest:
        """The request for the next model: with what is left of the call's time."""
        if self.ends is None or not self.attempts:
            return self.original
        left = max(self.ends - time.monotonic(), 0.0)
        return dataclasses.replace(self.original, timeout=left)

    def answered(self, i: int, response: ModelResponse) -> ModelResponse:
        if not self.attempts and response.model:
            return response
        return dataclasses.replace(
            response,
            model=response.model or self.chain.names[i],
            attempts=(*self.attempts, *response.attempts),
        )

    def failed(self, i: int, error: ModelError, started: float) -> None:
        """Record a failure; raise when the chain must not, or cannot, go on."""
        chain, name = self.chain, self.chain.names[i]
        last = i == len(chain.models) - 1
        out_of_time = self.ends is not None and time.monotonic() >= self.ends
        if not chain.falls_back(error) or (out_of_time and not last):
            error.failures = [*self.failures, *error.failures]
            raise error
        self.failures.append((name, error))
        self.attempts.append(
            ModelAttempt(
                model=name,
                kind=error.kind,
                error=f"{type(error).__name__}: {error}",
                seconds=time.perf_counter() - started,
            )
        )
        if last:
            listed = "; ".join(f"{n}: {e.kind}: {e}" for n, e in self.failures)
            message = f"all {len(self.failures)} models failed: {listed}"
            if isinstance(error, ContextWindowExceeded):  # the largest window was too small
                exc: ModelError = ContextWindowExceeded(
                    message,
                    status=error.status,
                    request_id=error.request_id,
                    tokens=error.tokens,
                    limit=error.limit,
                )
                exc.failures = list(self.failures)
                raise exc from error
            raise ModelError(
                message,
                status=error.status,
                kind=error.kind,
                request_id=error.request_id,
                retry_after=error.retry_after,
                failures=self.failures,
            ) from error


def _unfinished(name: str) -> ModelError:
    """A stream that ended with no response: cut off, so as if no answer came."""
    return ModelError(f"{name}: the stream ended without a final response", kind="unavailable")


def _name(client: object) -> str:
    model = getattr(client, "model", None)
    return model if isinstance(model, str) and model else type(client).__name__
