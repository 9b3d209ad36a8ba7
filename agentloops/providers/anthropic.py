"""Claude through the official `anthropic` SDK: the `ModelClient` for the Messages API,
plain or streamed, sync or async.

The SDK (the `anthropic` extra) is imported when an `AnthropicModel` is built, never at
`import agentloops`. Requests are built in `_anthropic_request`, replies checked and
merged in `_anthropic_reply` and `_anthropic_stream`; this module only sends.

Rule: a provider knows the vocabulary and tools, never the engine, structured output or a
loop.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from contextlib import aclosing, closing, contextmanager
from typing import TYPE_CHECKING, Any, Literal

from agentloops.errors import AgentLoopsError, ConfigurationError, ModelError
from agentloops.model import ModelRequest, ModelResponse
from agentloops.providers._anthropic_client import default_client, scrub, secrets_of, settings_of
from agentloops.providers._anthropic_reply import Turn, read_reply
from agentloops.providers._anthropic_request import build_params
from agentloops.providers._anthropic_stream import Assembly

if TYPE_CHECKING:
    import anthropic
    import httpx2

    from agentloops.events import Delta

_NONSTREAMING_MAX_TOKENS = 21_333
"""Above this `messages.create` refuses to send (its 10-minute budget: 3600 s * n / 128k)."""
_INSTALL = "pip install 'agentloops-kit[anthropic]'"


class AnthropicModel:
    """A `ModelClient` for Claude over the `anthropic` SDK, with `acomplete`, `stream`
    and `astream` besides `complete`.

    Args:
        model: the model id.
        client: an `anthropic.Anthropic` client. `None` builds one with `api_key`, or
            from the environment (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, a profile).
            Retries and timeouts are the client's (`max_retries`).
        async_client: an `anthropic.AsyncAnthropic` client for `acomplete` and `astream`.
            `None` builds one on first use with the sync client's key, base URL, timeout
            and retries (pass your own for custom headers, a proxy or an HTTP client).
        api_key: the API key, when no client is given and the environment has none.
        max_tokens: output limit when the request does not set one. Above the SDK's
            non-streaming limit (about 21k) `complete` streams under the hood.
        thinking: `"adaptive"` (Claude decides how much to think), `None` (no thinking
            param), or a raw `thinking` dict passed through as is.
        cache: set prompt-cache breakpoints on system + tools and on the newest message.

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
    ):
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens}")
        if thinking == "adaptive":
            thinking = {"type": "adaptive"}
        elif thinking is not None and not (isinstance(thinking, dict) and "type" in thinking):
            raise ConfigurationError(
                f'thinking must be "adaptive", None or a thinking dict, got {thinking!r}'
            )
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
        if params["max_tokens"] > self._stream_above:
            with closing(self._stream(params, request)) as items:
                return _final(items)
        turn = Turn(params, structured=request.output is not None)
        with self._errors():
            while turn.next is not None:
                raw = self.client.messages.with_raw_response.create(**turn.next)
                turn.add(read_reply(raw.read(), raw.request_id), raw.request_id)
            return turn.response()

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """`complete` over the async client. Cancelling it cancels the HTTP call.

        Raises:
            ConfigurationError: as `complete`.
            ModelError: as `complete`.
        """
        params = self._params(request)
        if params["max_tokens"] > self._stream_above:
            async with aclosing(self._astream(params, request)) as items:
                return await _afinal(items)
        turn = Turn(params, structured=request.output is not None)
        with self._errors():
            while turn.next is not None:
                raw = await self.async_client.messages.with_raw_response.create(**turn.next)
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
        return self._stream(self._params(request), request)

    def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        """`stream` over the async client. Close it (`aclose()`, or `contextlib.aclosing`)
        to stop early; cancelling the task that iterates it closes the HTTP stream."""
        return self._astream(self._params(request), request)

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(
            request,
            model=self.model,
            max_tokens=self.max_tokens,
            thinking=self.thinking,
            cache=self.cache,
            transform_schema=self._sdk.transform_schema,
        )

    def _stream(
        self, params: dict[str, Any], request: ModelRequest
    ) -> Generator[Delta | ModelResponse, None, None]:
        # A copy: the transcript's wire form is reused by the next call, which may come
        # before this generator is read to the end.
        turn = Turn(
            {**params, "messages": list(params["messages"])}, structured=request.output is not None
        )
        with self._errors():
            while turn.next is not None:
                with self.client.messages.create(stream=True, **turn.next) as events:
                    assembly = Assembly(turn.tool_calls, _request_id(events.response))
                    for sse in self._sdk.Stream.raw_events(events.response):
                        if sse.data:
                            yield from assembly.feed(sse.data)
                turn.add(assembly.reply(), assembly.request_id)
            response = turn.response()
        yield response

    async def _astream(
        self, params: dict[str, Any], request: ModelRequest
    ) -> AsyncGenerator[Delta | ModelResponse, None]:
        turn = Turn(
            {**params, "messages": list(params["messages"])}, structured=request.output is not None
        )
        with self._errors():
            while turn.next is not None:
                events = await self.async_client.messages.create(stream=True, **turn.next)
                async with events:
                    assembly = Assembly(turn.tool_calls, _request_id(events.response))
                    async for sse in self._sdk.AsyncStream.raw_events(events.response):
                        for delta in assembly.feed(sse.data) if sse.data else ():
                            yield delta
                turn.add(assembly.reply(), assembly.request_id)
            response = turn.response()
        yield response

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Every failure below becomes a `ModelError`, with the credentials blanked out."""
        try:
            yield
        except AgentLoopsError as exc:
            scrub(exc, secrets=self._secrets)
            raise
        except Exception as exc:
            error = self._model_error(exc)
            if error is None:  # not the API's nor the network's: a bug, left as it is
                raise
            raise scrub(error, exc, secrets=self._secrets) from exc

    def _model_error(self, exc: Exception) -> ModelError | None:
        sdk, http, kind = self._sdk, self._http, type(exc).__name__
        if isinstance(exc, sdk.APIStatusError):
            return ModelError(
                f"Anthropic API error {exc.status_code} ({exc.type or 'unknown'}): "
                f"{exc.api_message or exc.message}",
                request_id=exc.request_id,
                status=exc.status_code,
            )
        if isinstance(exc, sdk.AnthropicError):  # connection errors, timeouts before a reply
            return ModelError(f"Anthropic API call failed: {kind}: {exc}")
        if isinstance(exc, http.TimeoutException):  # no byte within the read timeout
            return ModelError(f"Anthropic API stream stalled: {kind}: {exc}")
        if isinstance(exc, (http.HTTPError, http.StreamError, UnicodeDecodeError)):
            return ModelError(f"Anthropic API stream broke: {kind}: {exc}")
        return None


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
