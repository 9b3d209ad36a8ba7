"""Claude through the official `anthropic` SDK: the `ModelClient` for the Messages API,
plain or streamed, sync or async.

The SDK (the `anthropic` extra) is imported when an `AnthropicModel` is built, never at
`import agentloops`. Requests are built in `_anthropic_request`, replies checked and
merged in `_anthropic_reply` and `_anthropic_stream`; this module only sends.

Rule: a provider knows the vocabulary and tools, never the engine, structured output or a
loop.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator
from contextlib import aclosing, closing, contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agentloops.errors import AgentLoopsError, ConfigurationError, ContextWindowExceeded, ModelError
from agentloops.model import ModelRequest, ModelResponse
from agentloops.providers import _window as window
from agentloops.providers._anthropic_client import (
    default_client,
    scrub,
    secrets_of,
    settings_of,
    shown,
)
from agentloops.providers._anthropic_reply import Turn, read_reply
from agentloops.providers._anthropic_request import Mechanism, build_params
from agentloops.providers._anthropic_stream import Assembly
from agentloops.providers.retry import RetryPolicy, retry_after
from agentloops.usage import Price

if TYPE_CHECKING:
    import anthropic
    import httpx2

    from agentloops.events import Delta

_NONSTREAMING_MAX_TOKENS = 21_333
"""Above this `messages.create` refuses to send (its 10-minute budget: 3600 s * n / 128k)."""
_INSTALL = "pip install 'agentloops-kit[anthropic]'"
_TOO_LONG = ("prompt is too long", "exceed context limit", "context window")
"""How the API's 400 says the prompt does not fit the context window."""
T = TypeVar("T")


class AnthropicModel:
    """A `ModelClient` for Claude over the `anthropic` SDK, with `acomplete`, `stream`
    and `astream` besides `complete`.

    Args:
        model: the model id.
        client: an `anthropic.Anthropic` client. `None` builds one with `api_key`, or
            from the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, a profile).
            Timeouts are the client's; its `max_retries` is the default for `retry`.
        async_client: an `anthropic.AsyncAnthropic` client for `acomplete` and `astream`.
            `None` builds one on first use with the sync client's key, base URL, timeout
            and retries (pass your own for custom headers, a proxy or an HTTP client).
        api_key: the API key, when no client is given and the environment has none.
        max_tokens: output limit when the request does not set one. Above the SDK's
            non-streaming limit (about 21k) `complete` streams under the hood.
        thinking: `"adaptive"` (Claude decides how much to think), `None` (no thinking
            param), or a raw `thinking` dict passed through as is.
        cache: set prompt-cache breakpoints on system + tools and on the newest message.
        retry: the `RetryPolicy` (default: retry 408, 409, 429 and 5xx, and unanswered
            requests, as many times as the client's `max_retries`, 2 for a client built
            here). agentloops retries, not the SDK: the client's own retries are turned off
            for the calls this model makes, so one policy decides and a run's deadline
            bounds the waits.
        price: what this model's tokens cost, for a loop's `max_cost` (default: the
            packaged table's price for `model`, if it has one).
        structured: how a request with `output` asks for JSON. `"native"`: the API's
            JSON-schema output (`output_config.format`), which works next to tools and
            with every thinking setting. `"tool"`: a final-answer tool offered next to the
            request's tools, its arguments the answer (the model is made to end on a tool
            call, except with manual thinking, which forbids forcing one). `"auto"`
            (default): native, and the final-answer tool for good once the API refuses
            native output for this model (an older model without structured outputs).

    Raises:
        ConfigurationError: the SDK is not installed, no credentials were found, or a
            setting is invalid.

    Examples:
        >>> from agentloops import AnthropicModel, ReActLoop
        >>> loop = ReActLoop(AnthropicModel(), [search])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = "claude-sonnet-5",
        *,
        client: anthropic.Anthropic | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        thinking: Literal["adaptive"] | dict[str, Any] | None = "adaptive",
        cache: bool = True,
        retry: RetryPolicy | None = None,
        price: Price | None = None,
        structured: Literal["auto", "native", "tool"] = "auto",
    ):
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens}")
        if thinking == "adaptive":
            thinking = {"type": "adaptive"}
        elif thinking is not None and not (isinstance(thinking, dict) and "type" in thinking):
            raise ConfigurationError(
                f'thinking must be "adaptive", None or a thinking dict, got {thinking!r}'
            )
        if structured not in ("auto", "native", "tool"):
            raise ConfigurationError(f"structured must be auto, native or tool: {structured!r}")
        if api_key is not None and (client or async_client) is not None:
            raise ConfigurationError("pass api_key= or a client, not both")
        try:  # here, not at module top: importing agentloops must stay SDK-free
            import anthropic
            import httpx2
            from anthropic._constants import MODEL_NONSTREAMING_TOKENS
        except ImportError as exc:
            raise ConfigurationError(
                f"AnthropicModel needs the anthropic SDK ({exc}); install it with: {_INSTALL}"
            ) from None

        self._sdk, self._http = anthropic, httpx2
        if client is None and async_client is None:
            client = default_client(anthropic, api_key)
        self._client, self._async_client = client, async_client
        self._secrets = secrets_of(client) + secrets_of(async_client)
        self.model = model
        self.max_tokens = max_tokens
        self.thinking: dict[str, Any] | None = thinking
        self.cache = cache
        given = client if client is not None else async_client
        assert given is not None
        self.retry = retry or RetryPolicy(max_retries=given.max_retries)
        self.price = price
        self.structured = structured
        self._mechanism: Mechanism = "tool" if structured == "tool" else "native"
        """How structured output is asked for now; `"auto"` moves it to the tool once."""
        self._quiet: tuple[Any, Any] = (None, None)
        """The sync and async clients with the SDK's own retries off, built on first use."""
        self._stream_above = min(
            _NONSTREAMING_MAX_TOKENS, MODEL_NONSTREAMING_TOKENS.get(model, _NONSTREAMING_MAX_TOKENS)
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r}, thinking={self.thinking!r}, cache={self.cache})"

    @property
    def client(self) -> anthropic.Anthropic:
        """The sync SDK client (built from the async one's settings when only that was given)."""
        if self._client is None:
            self._client = self._sdk.Anthropic(**settings_of(self._async_client))
        return self._client

    @property
    def async_client(self) -> anthropic.AsyncAnthropic:
        """The async SDK client (built on first use from the sync one's settings)."""
        if self._async_client is None:
            self._async_client = self._sdk.AsyncAnthropic(**settings_of(self._client))
        return self._async_client

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send `request` and return Claude's turn, continuing `pause_turn` pauses.

        Raises:
            ConfigurationError: a request the API would reject (before any HTTP call).
            ModelError: the API failed after the SDK's retries, sent a reply of the wrong
                shape, or an unknown stop reason. `.status` and `.request_id` are set
                when known.
        """
        params = self._params(request)
        while True:
            try:
                return self._complete(params, request)
            except _NativeRefused:  # this model has no native output: ask again with the tool
                params = self._params(request)

    def _complete(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        if params["max_tokens"] > self._stream_above:
            with closing(self._stream(params, request)) as items:
                return _final(items)
        turn = self._turn(params, request)
        ends = _ends(request)
        with self._errors(params):
            while turn.next is not None:
                create = self._sync().messages.with_raw_response.create
                raw = self._send(create, turn.next, ends)
                turn.add(read_reply(raw.read(), raw.request_id), raw.request_id)
            return turn.response()

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """`complete` over the async client. Cancelling it cancels the HTTP call.

        Raises:
            ConfigurationError: as `complete`.
            ModelError: as `complete`.
        """
        params = self._params(request)
        while True:
            try:
                return await self._acomplete(params, request)
            except _NativeRefused:
                params = self._params(request)

    async def _acomplete(self, params: dict[str, Any], request: ModelRequest) -> ModelResponse:
        if params["max_tokens"] > self._stream_above:
            async with aclosing(self._astream(params, request)) as items:
                return await _afinal(items)
        turn = self._turn(params, request)
        ends = _ends(request)
        with self._errors(params):
            while turn.next is not None:
                create = self._async().messages.with_raw_response.create
                raw = await self._asend(create, turn.next, ends)
                turn.add(read_reply(await raw.read(), raw.request_id), raw.request_id)
            return turn.response()

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        """Claude's turn as it is written: `TextDelta`, `ThinkingDelta` and `ToolCallDelta`
        events, then the same `ModelResponse` that `complete` returns.

        The request is checked when `stream` is called; the HTTP call starts at the first
        `next()`. Closing the iterator early closes the HTTP stream.

        Raises:
            ConfigurationError: as `complete`, from this call.
            ModelError: while iterating, as `complete`; also for a stream cut off before
                its end, or an `error` event in it (no final response is yielded then).
        """
        return self._retried(self._params(request), request)

    def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        """`stream` over the async client. Close it (`aclose()`, or `contextlib.aclosing`)
        to stop early; cancelling the task that iterates it closes the HTTP stream."""
        return self._aretried(self._params(request), request)

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens `request` comes to, as the API counts them
        (`messages.count_tokens`: free, and rate-limited apart from messages); retried
        by the model's `RetryPolicy`.

        Raises:
            ModelError: as `complete` (a request too long for any window is still
                counted: the endpoint has no window).
        """
        params = self._count_params(request)
        with self._errors():
            counted = self._send(self._sync().messages.count_tokens, params, _ends(request))
        return int(counted.input_tokens)

    async def acount_tokens(self, request: ModelRequest) -> int:
        """`count_tokens` over the async client."""
        params = self._count_params(request)
        with self._errors():
            counted = await self._asend(self._async().messages.count_tokens, params, _ends(request))
        return int(counted.input_tokens)

    def _count_params(self, request: ModelRequest) -> dict[str, Any]:
        params = self._params(request)
        del params["max_tokens"]  # the count endpoint takes everything else create does
        params["messages"] = list(params["messages"])  # the live wire list is the next call's
        return params

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(
            request,
            model=self.model,
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            cache=self.cache,
            transform_schema=self._sdk.transform_schema,
            mechanism=self._mechanism,
        )

    def _turn(self, params: dict[str, Any], request: ModelRequest) -> Turn:
        output = request.output  # its tool is never one of the request's own
        final = output.tool if output is not None else None
        return Turn(params, structured=output is not None, final_tool=final)

    def _retried(
        self, params: dict[str, Any], request: ModelRequest
    ) -> Generator[Delta | ModelResponse, None, None]:
        """`_stream`, asked again with the final-answer tool when native output is refused
        (before anything streamed: the refusal is the call's answer)."""
        while True:
            try:
                yield from self._stream(params, request)
                return
            except _NativeRefused:
                params = self._params(request)

    async def _aretried(
        self, params: dict[str, Any], request: ModelRequest
    ) -> AsyncGenerator[Delta | ModelResponse, None]:
        while True:
            try:
                async with aclosing(self._astream(params, request)) as items:
                    async for item in items:
                        yield item
                return
            except _NativeRefused:
                params = self._params(request)

    def _stream(
        self, params: dict[str, Any], request: ModelRequest
    ) -> Generator[Delta | ModelResponse, None, None]:
        # A copy: the transcript's wire form is reused by the next call, which may come
        # before this generator is read to the end.
        turn = self._turn({**params, "messages": list(params["messages"])}, request)
        ends = _ends(request)
        with self._errors(params):
            while turn.next is not None:
                streamed = {**turn.next, "stream": True}
                opened: Any = self._send(self._sync().messages.create, streamed, ends)
                with opened as events:
                    assembly = Assembly(turn.tool_calls, _request_id(events.response))
                    for sse in self._sdk.Stream.raw_events(events.response):
                        if sse.data:
                            yield from assembly.feed(sse.data)
                turn.add(
                    assembly.reply(),
                    assembly.request_id,
                    usage_reported=assembly.usage_reported,
                )
            response = turn.response()
        yield response

    async def _astream(
        self, params: dict[str, Any], request: ModelRequest
    ) -> AsyncGenerator[Delta | ModelResponse, None]:
        turn = self._turn({**params, "messages": list(params["messages"])}, request)
        ends = _ends(request)
        with self._errors(params):
            while turn.next is not None:
                streamed = {**turn.next, "stream": True}
                events: Any = await self._asend(self._async().messages.create, streamed, ends)
                async with events:
                    assembly = Assembly(turn.tool_calls, _request_id(events.response))
                    async for sse in self._sdk.AsyncStream.raw_events(events.response):
                        for delta in assembly.feed(sse.data) if sse.data else ():
                            yield delta
                turn.add(
                    assembly.reply(),
                    assembly.request_id,
                    usage_reported=assembly.usage_reported,
                )
            response = turn.response()
        yield response

    # -- sending, with the retry policy ---------------------------------------------------

    def _sync(self) -> anthropic.Anthropic:
        if self._quiet[0] is None:
            self._quiet = (self.client.with_options(max_retries=0), self._quiet[1])
        return self._quiet[0]  # type: ignore[no-any-return]

    def _async(self) -> anthropic.AsyncAnthropic:
        if self._quiet[1] is None:
            self._quiet = (self._quiet[0], self.async_client.with_options(max_retries=0))
        return self._quiet[1]  # type: ignore[no-any-return]

    def _timeout(self, ends: float | None) -> dict[str, float]:
        """A call's own timeout when the run's deadline leaves less than the client's."""
        if ends is None:
            return {}
        left = max(ends - time.monotonic(), 0.001)
        limit = self.client.timeout
        read = limit if isinstance(limit, int | float) else getattr(limit, "read", None)
        return {"timeout": left if read is None else min(float(read), left)}

    def _send(self, call: Callable[..., T], params: dict[str, Any], ends: float | None) -> T:
        """`call(**params)`, sent again as the retry policy says."""
        attempt = 0
        while True:
            try:
                return call(**params, **self._timeout(ends))
            except Exception as exc:
                wait = self._retry_wait(exc, attempt, ends)
                if wait is None:
                    raise
            time.sleep(wait)
            attempt += 1

    async def _asend(
        self, call: Callable[..., Awaitable[T]], params: dict[str, Any], ends: float | None
    ) -> T:
        import anyio  # httpx's own dependency; works under asyncio and trio

        attempt = 0
        while True:
            try:
                return await call(**params, **self._timeout(ends))
            except Exception as exc:
                wait = self._retry_wait(exc, attempt, ends)
                if wait is None:
                    raise
            await anyio.sleep(wait)
            attempt += 1

    def _retry_wait(self, exc: Exception, attempt: int, ends: float | None) -> float | None:
        """How long to wait before sending again after `exc`, or `None` to give up."""
        sdk = self._sdk
        left = None if ends is None else ends - time.monotonic()
        if isinstance(exc, sdk.APIStatusError):
            if _too_long(exc):
                return None
            headers = exc.response.headers
            return self.retry.next_wait(attempt, exc.status_code, headers, remaining=left)
        if isinstance(exc, sdk.APIConnectionError):  # no answer: refused, reset, timed out
            return self.retry.next_wait(attempt, None, remaining=left)
        return None

    @contextmanager
    def _errors(self, params: dict[str, Any] | None = None) -> Iterator[None]:
        """Every failure below becomes a `ModelError`, with the credentials blanked out;
        a refusal of the native output `params` asked for is `_NativeRefused`."""
        try:
            yield
        except AgentLoopsError as exc:
            scrub(exc, secrets=self._secrets)
            raise
        except Exception as exc:
            if params is not None and "output_config" in params and self._refuses_native(exc):
                self._mechanism = "tool"  # for good: this model has no native JSON output
                raise _NativeRefused from exc
            error = self._model_error(exc)
            if error is None:  # not the API's nor the network's: a bug, left as it is
                raise
            raise scrub(error, exc, secrets=self._secrets) from exc

    def _model_error(self, exc: Exception) -> ModelError | None:
        sdk, http, kind = self._sdk, self._http, type(exc).__name__
        if isinstance(exc, sdk.APIStatusError):
            message = (
                f"Anthropic API error {exc.status_code} ({exc.type or 'unknown'}): "
                f"{exc.api_message or exc.message}"
            )
            if _too_long(exc):
                tokens, limit = window.numbers(message)
                return ContextWindowExceeded(
                    message,
                    request_id=exc.request_id,
                    status=exc.status_code,
                    tokens=tokens,
                    limit=limit,
                )
            if exc.status_code == 404:
                message += self._hint()
            return ModelError(
                message,
                request_id=exc.request_id,
                status=exc.status_code,
                kind="overloaded" if exc.type == "overloaded_error" else None,
                retry_after=retry_after(exc.response.headers),
            )
        if isinstance(exc, sdk.APITimeoutError):
            return ModelError(f"Anthropic API call timed out: {kind}: {exc}", kind="timeout")
        if isinstance(exc, sdk.APIConnectionError):  # no answer: refused, reset
            return ModelError(f"Anthropic API call failed: {kind}: {exc}", kind="unavailable")
        if isinstance(exc, sdk.AnthropicError):
            return ModelError(f"Anthropic API call failed: {kind}: {exc}", kind="bad_reply")
        if isinstance(exc, http.TimeoutException):  # no byte within the read timeout
            return ModelError(f"Anthropic API stream stalled: {kind}: {exc}", kind="timeout")
        if isinstance(exc, (http.HTTPError, http.StreamError, UnicodeDecodeError)):
            return ModelError(f"Anthropic API stream broke: {kind}: {exc}", kind="unavailable")
        return None

    def _hint(self) -> str:
        """What to try after a 404: the SDK adds `/v1/messages` to the base URL itself."""
        client = self._client if self._client is not None else self._async_client
        assert client is not None
        base = shown(client)
        if base.endswith("/v1"):
            return (
                f" (the SDK adds /v1/messages to the base URL itself: try "
                f"base_url={base[:-3]!r}, not {base!r})"
            )
        return f" (no /v1/messages at {base!r}: is the base URL right?)"

    def _refuses_native(self, exc: Exception) -> bool:
        """Whether the API refused `output_config.format` (with `structured="auto"`)."""
        if self.structured != "auto" or self._mechanism != "native":
            return False
        if not isinstance(exc, self._sdk.BadRequestError):
            return False
        message = str(exc.message).lower()
        return any(word in message for word in _NATIVE_WORDS)


class _NativeRefused(Exception):
    """The API refused native JSON output for this model: ask again with the tool."""


_NATIVE_WORDS = ("output_config", "output_format", "structured output")
"""What a 400's message names when the API refuses native JSON output."""


def _ends(request: ModelRequest) -> float | None:
    """When the call must be over (`time.monotonic()`), for a request with a timeout."""
    return None if request.timeout is None else time.monotonic() + request.timeout


def _too_long(exc: Any) -> bool:
    """Whether the API refused the request because the prompt does not fit the window."""
    text = f"{getattr(exc, 'api_message', '') or ''} {getattr(exc, 'message', '')}".lower()
    return exc.status_code in (400, 413) and any(marker in text for marker in _TOO_LONG)


def _request_id(response: httpx2.Response) -> str | None:
    request_id: str | None = response.headers.get("request-id")
    return request_id


def _final(items: Iterator[Delta | ModelResponse]) -> ModelResponse:
    """The response that ends a stream (its deltas are dropped)."""
    for item in items:
        if isinstance(item, ModelResponse):
            return item
    raise AssertionError("a stream ended without a response")  # pragma: no cover


async def _afinal(items: AsyncIterator[Delta | ModelResponse]) -> ModelResponse:
    async for item in items:
        if isinstance(item, ModelResponse):
            return item
    raise AssertionError("a stream ended without a response")  # pragma: no cover
