"""`OpenAICompatModel`: Chat Completions with tools over httpx, for OpenAI, vLLM, Ollama,
llama.cpp's `llama-server` and llama-cpp-python's server; sync, async and streaming.

Every path shares one plan of attempts (`_attempts`, a generator that never touches the
network): it says which body to send, reads each answer, adapts the request when the
server refuses a parameter, and says when to wait and retry. A sync and an async driver
(`_openai_drivers`) carry it out. Request bodies are built in `_openai_request`, replies
checked and parsed in `_openai_reply`, streams assembled in `_openai_stream`.
httpx is imported when a client is built, not when agentloops is.

Rule: a provider knows the vocabulary and tools, never the engine, structured output or a
loop.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from agentloops import _secrets
from agentloops.errors import AgentLoopsError, ConfigurationError, ContextWindowExceeded, ModelError
from agentloops.events import Delta
from agentloops.messages import ToolCall
from agentloops.model import ModelRequest, ModelResponse, estimate_tokens
from agentloops.providers import _openai_http as http
from agentloops.providers import _openai_tokens as tokens
from agentloops.providers import _window as window
from agentloops.providers._openai_drivers import Attempts, Send, Wait, adrive, drive
from agentloops.providers._openai_reply import parse_arguments, parse_completion
from agentloops.providers._openai_request import (
    FALLBACK,
    TOOLS_FALLBACK,
    Mechanism,
    request_body,
)
from agentloops.providers._openai_stream import StreamAssembler
from agentloops.providers.retry import RetryPolicy, retry_after
from agentloops.tools import INVALID_ARGUMENTS
from agentloops.usage import Price

if TYPE_CHECKING:
    import httpx

StructuredMode = Literal["auto", "json_schema", "json_object", "tool", "prompt"]

DEFAULT_MAX_TOKENS = 1024
"""Sent when neither the request nor the client sets a limit: a local server left
without one generates until its context is full, and keeps going after we give up."""

_MAX_ECHO = 4096
_KEY = "[api key]"
"""What a credential is replaced with in errors."""
_SSE_EXTRA = "pip install 'agentloops-kit[sse]'"
_COUNT_TIMEOUT = 30.0
"""Seconds a tokenize call may take (it reads no model output: it is quick or broken)."""


class OpenAICompatModel:
    """A `ModelClient` for any server that speaks OpenAI's Chat Completions.

    It implements `complete`, `acomplete`, `stream` and `astream` (streaming needs the
    `sse` extra, httpx-sse: `pip install 'agentloops-kit[sse]'`).

    Args:
        base_url: up to and including `/v1`, e.g. `http://localhost:11434/v1` (Ollama),
            `http://localhost:8000/v1` (vLLM), `http://localhost:8080/v1` (llama-server).
        model: the model name the server knows, e.g. `"qwen3:8b"`.
        api_key: sent as a bearer token; never logged nor put in an error message.
        http_client: your own `httpx.Client` (proxies, TLS, a mock transport, a cassette);
            it is not closed by this client. By default one is made with `timeout`.
        async_http_client: the same for `acomplete` and `astream`; by default one is made
            on first use (it belongs to the event loop that first uses it).
        max_tokens: the output limit when a request sets none; always sent (default 1024).
        max_retries: retries after a 408/409/429/5xx answer or a connection error, with
            exponential backoff that honours `Retry-After`; then `ModelError`. A shorthand
            for `retry=RetryPolicy(max_retries=...)` (default 3).
        retry: the whole `RetryPolicy` (statuses, backoff, `Retry-After` cap).
        timeout: seconds the default HTTP clients wait for a non-streamed reply (300: no
            byte comes back before the last token, so this bounds the whole generation; a
            200-second call to a slow local server has been seen, and one given up on
            keeps the server busy). With the default 3 retries a call can take about
            4 x 300 s + 3.5 s of backoff before it fails; a run's `deadline=` bounds it.
        stream_timeout: seconds a stream may go without a byte (600: a long prompt on a
            slow server may take minutes before its first token).
        price: what this model's tokens cost, for a loop's `max_cost` (default: the
            packaged table's price for `model`, if it has one).
        structured: how to get JSON for a request with `output`: `"json_schema"` and
            `"json_object"` send that `response_format` (the latter with the schema beside
            it, and in the prompt); `"tool"` offers a final-answer function next to the
            request's tools, whose arguments are the answer (`tool_choice` "required", or
            that function when nothing else may be called); `"prompt"` puts the schema in
            the system prompt only. `"auto"` (default) starts with `"json_schema"` and moves
            on for good when the server's error says it refused what was sent: a request
            without tools to `"json_object"`, then `"prompt"`; a request with tools (it is
            learned apart) to `"tool"` (a grammar would keep the model from calling tools),
            then, if the server refuses `tool_choice`, to `"prompt"`.
        extra_body: more fields for every request body, e.g. `{"temperature": 0.2}`.
        sleep: how to wait between retries (tests pass a recorder).
        async_sleep: the same for the async paths (default `anyio.sleep`).

    Examples:
        >>> model = OpenAICompatModel("http://localhost:11434/v1", "qwen3:8b")
        >>> model
        OpenAICompatModel('http://localhost:11434/v1', 'qwen3:8b')
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        stream_timeout: float = 600.0,
        price: Price | None = None,
        structured: StructuredMode = "auto",
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], object] = time.sleep,
        async_sleep: Callable[[float], Awaitable[object]] | None = None,
    ):
        if max_retries is not None and retry is not None:
            raise ConfigurationError("pass max_retries= or retry=, not both")
        if timeout <= 0 or stream_timeout <= 0:
            raise ConfigurationError("timeout and stream_timeout must be > 0")
        if structured not in ("auto", "json_schema", "json_object", "tool", "prompt"):
            raise ConfigurationError(
                f"structured must be auto, json_schema, json_object, tool or prompt: {structured!r}"
            )
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens}")
        import httpx  # here, not at module level: `import agentloops` stays light

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens or DEFAULT_MAX_TOKENS
        self.retry = retry or RetryPolicy(max_retries=3 if max_retries is None else max_retries)
        self.timeout = timeout
        self.stream_timeout = stream_timeout
        self.price = price
        self.structured: StructuredMode = structured
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._api_key = api_key
        self._secrets = tuple(
            s for s in {api_key or "", *_secrets.in_url(base_url)} if len(s) >= _secrets.SHORTEST
        )
        """The credentials kept out of every error (the key, and any in the base URL)."""
        self._shown = _secrets.url(self.base_url, _KEY)
        """The base URL as errors and `repr` show it: user information and keys blanked."""
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_async = async_http_client is None
        self._async_http = async_http_client
        self._transport_errors = (httpx.TransportError,)
        self._timeouts = (httpx.TimeoutException,)
        self._lock = threading.Lock()
        self._mechanism: Mechanism = "json_schema" if structured == "auto" else structured
        """How structured output is asked for now, in a request without tools; `"auto"`
        moves it down on a refusal."""
        self._tools_mechanism: Mechanism = self._mechanism
        """The same for a request with tools, learned apart."""
        self._limit_field = "max_tokens"
        """Becomes `max_completion_tokens` when a server says it wants that instead."""
        self._raw_args: dict[str, tuple[str, dict[str, Any]]] = {}
        self._tokenizer: str | None = None
        """Which tokenize endpoint the server serves (`"tokenize"`, `"extras"`), `""` for
        none (the estimate from then on), `None` before the first count."""
        """Call id -> the arguments as written and as parsed (parsed once, not per request)."""

    @property
    def max_retries(self) -> int:
        """Retries after the first try (`retry.max_retries`)."""
        return self.retry.max_retries

    def __repr__(self) -> str:  # no key here, ever (nor one put in the base URL)
        return f"OpenAICompatModel({self._shown!r}, {self.model!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # For process pools and Dask: rebuild from the settings, with fresh HTTP clients.
        if not (self._owns_http and self._owns_async):
            raise TypeError(
                "an OpenAICompatModel built with your own http_client cannot be pickled; "
                "build the model inside the function that runs on the worker"
            )
        settings = {
            "api_key": self._api_key,
            "max_tokens": self.max_tokens,
            "retry": self.retry,
            "timeout": self.timeout,
            "stream_timeout": self.stream_timeout,
            "price": self.price,
            "structured": self.structured,
            "extra_body": self.extra_body,
            "sleep": self._sleep,
            "async_sleep": self._async_sleep,
        }
        return (_rebuild, (self.base_url, self.model, settings))

    def close(self) -> None:
        """Close the sync HTTP client this model made (not one you passed in)."""
        if self._owns_http:
            self._http.close()

    async def aclose(self) -> None:
        """Close both HTTP clients this model made (not ones you passed in)."""
        self.close()
        if self._owns_async and self._async_http is not None:
            await self._async_http.aclose()

    def __enter__(self) -> OpenAICompatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the four ways to call -----------------------------------------------------------

    def complete(self, request: ModelRequest) -> ModelResponse:
        """One Chat Completions call, with retries; see the class docstring.

        Raises:
            ModelError: the server failed after the retries, answered 4xx, or sent a
                reply that is not JSON or not of the expected shape (the field is named);
                `.status` and `.request_id` when known.
        """
        with self._errors():
            response = self._drive(request, stream=False)
            return self._accept(request, self._json(response))

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """`complete` over `httpx.AsyncClient`: the same request, retries and parsing."""
        with self._errors():
            response = await self._adrive(request, stream=False)
            return self._accept(request, self._json(response))

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        """Deltas as the server sends them, then the `ModelResponse` `complete` would give.

        Retries happen only before the first byte. Closing the iterator early closes the
        HTTP response.

        Raises:
            ModelError: as `complete`, and when the stream is cut off, stalls past the
                timeout, or sends a chunk that is not JSON or not of the expected shape.
            ConfigurationError: the `openai` extra (httpx-sse) is not installed.
        """
        sse = _httpx_sse()
        with self._errors():
            response = self._drive(request, stream=True)
            assembler = StreamAssembler(_taken(request))
            try:
                for event in sse.EventSource(response).iter_sse():
                    yield from assembler.feed(event.data, event.event)
                    if assembler.done:
                        break
            except (*self._transport_errors, sse.SSEError) as exc:
                raise self._broken(exc, assembler) from exc
            finally:
                response.close()
            final = self._accept(request, assembler.body())
        yield final

    async def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        """`stream` over `httpx.AsyncClient`. Close it early with `aclose()` (or
        `contextlib.aclosing`) to close the HTTP response at once."""
        sse = _httpx_sse()
        with self._errors():
            response = await self._adrive(request, stream=True)
            assembler = StreamAssembler(_taken(request))
            try:
                async for event in sse.EventSource(response).aiter_sse():
                    for delta in assembler.feed(event.data, event.event):
                        yield delta
                    if assembler.done:
                        break
            except (*self._transport_errors, sse.SSEError) as exc:
                raise self._broken(exc, assembler) from exc
            finally:
                await response.aclose()
            final = self._accept(request, assembler.body())
        yield final

    # -- token counts ----------------------------------------------------------------------

    def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens `request` comes to: the server's tokenizer where it serves one
        (vLLM's and llama-server's `/tokenize`, llama-cpp-python's
        `/extras/tokenize/count`), else `agentloops.model.estimate_tokens`. A server that
        answers 404 is not asked again by this client; one that fails is asked again
        next time (the estimate stands in meanwhile). Never raises for a server without
        a tokenizer."""
        if self._tokenizer == "":
            return estimate_tokens(request)
        for probe in self._probes(request):
            try:
                answer = self._http.post(
                    probe.url, json=probe.body, headers=self._headers, timeout=_COUNT_TIMEOUT
                )
            except self._transport_errors:
                return estimate_tokens(request)
            count = self._counted(probe, answer)
            if count is not None:
                return count
            if self._tokenizer != "" and self._tokenizer is not None:
                return estimate_tokens(request)  # a known tokenizer failed this once
        self._tokenizer = ""
        return estimate_tokens(request)

    async def acount_tokens(self, request: ModelRequest) -> int:
        """`count_tokens` over the async HTTP client."""
        if self._tokenizer == "":
            return estimate_tokens(request)
        client = self._async_client()
        for probe in self._probes(request):
            try:
                answer = await client.post(
                    probe.url, json=probe.body, headers=self._headers, timeout=_COUNT_TIMEOUT
                )
            except self._transport_errors:
                return estimate_tokens(request)
            count = self._counted(probe, answer)
            if count is not None:
                return count
            if self._tokenizer != "" and self._tokenizer is not None:
                return estimate_tokens(request)
        self._tokenizer = ""
        return estimate_tokens(request)

    def _probes(self, request: ModelRequest) -> list[tokens.Probe]:
        body = request_body(
            request,
            model=self.model,
            mechanism=self._mechanism_for(request),
            max_tokens=None,
            stream=False,
            echo=self._echo,
            extra={},
        )
        found = tokens.probes(self.base_url, self.model, body)
        return [p for p in found if self._tokenizer in (None, p.name)]

    def _counted(self, probe: tokens.Probe, answer: httpx.Response) -> int | None:
        """The count in a tokenizer's answer (its endpoint remembered), or `None`."""
        if answer.status_code >= 400:
            if answer.status_code in tokens.MISSING and self._tokenizer is None:
                return None  # not served here: the next endpoint, or the estimate for good
            self._tokenizer = self._tokenizer or probe.name  # served, failed this once
            return None
        try:
            count = tokens.read(probe, answer.json())
        except ValueError:
            count = None
        if count is not None:
            self._tokenizer = probe.name
        return count

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    # -- the plan of attempts, and its two drivers ---------------------------------------

    def _attempts(self, request: ModelRequest, *, stream: bool, owned: bool) -> Attempts:
        """Send, read the answer, adapt or wait; returns the first good answer.

        A refused parameter (decided from the error body, whatever the status) changes
        the request and spends no retry; each refusal can happen once, so this ends.
        With `request.timeout`, no try starts, and no wait runs, past that many seconds.
        `owned`: the HTTP client is one this model made (its timeouts are ours to set).
        """
        attempt = 0
        ends = None if request.timeout is None else time.monotonic() + request.timeout
        while True:
            mechanism = self._mechanism_for(request)
            limit = request.max_tokens or self.max_tokens
            tokens = None if "max_completion_tokens" in self.extra_body else limit
            body = request_body(
                request,
                model=self.model,
                mechanism=mechanism,
                max_tokens=(self._limit_field, tokens) if tokens else None,
                stream=stream,
                echo=self._echo,
                extra=self.extra_body,
            )
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            left = None if ends is None else ends - time.monotonic()
            if left is not None and left <= 0:
                raise self._out_of_time(request, attempt)
            answer = yield Send(self._url, body, headers, self._timeout(stream, owned, left))
            left = None if ends is None else ends - time.monotonic()
            if isinstance(answer, Exception):
                wait = self.retry.next_wait(attempt, None, remaining=left)
                if wait is None:
                    raise self._unanswered(answer, attempt + 1) from answer
            else:
                assert answer is not None
                status = answer.status_code
                if status < 400:
                    return answer
                refused = http.refusal(status, answer.text)
                if refused in ("response_format", "tool_choice") and self._adapt_structured(
                    request, mechanism, refused
                ):
                    continue
                if refused == "max_tokens" and self._limit_field == "max_tokens":
                    self._limit_field = "max_completion_tokens"
                    continue
                if http.context_exceeded(status, answer.text):
                    raise self._error(answer, attempt + 1, kind=ContextWindowExceeded)
                wait = self.retry.next_wait(attempt, status, answer.headers, remaining=left)
                if wait is None:
                    raise self._error(answer, attempt + 1)
            yield Wait(wait)
            attempt += 1

    def _timeout(self, stream: bool, owned: bool, left: float | None) -> float | None:
        """The timeout of one try: the stream's or the reply's for an HTTP client this
        model made (`None`: a client you passed in keeps its own), cut to what is left."""
        base = (self.stream_timeout if stream else self.timeout) if owned else None
        if left is None:
            return base
        return left if base is None else min(base, left)

    def _mechanism_for(self, request: ModelRequest) -> Mechanism | None:
        if request.output is None:
            return None
        return self._tools_mechanism if request.tools else self._mechanism

    def _adapt_structured(
        self, request: ModelRequest, mechanism: Mechanism | None, refused: str
    ) -> bool:
        """Move to the next mechanism for good when the server refused this one."""
        if self.structured != "auto" or mechanism is None:
            return False
        if request.tools:
            following = TOOLS_FALLBACK.get((mechanism, refused))
            if following is None:
                return False
            self._tools_mechanism = following  # this server lacks it: stop asking
            return True
        if refused != "response_format" or mechanism not in FALLBACK:
            return False
        self._mechanism = FALLBACK[mechanism]
        return True

    def _drive(self, request: ModelRequest, *, stream: bool) -> httpx.Response:
        plan = self._attempts(request, stream=stream, owned=self._owns_http)
        return drive(plan, self._http, self._sleep, self._transport_errors)

    async def _adrive(self, request: ModelRequest, *, stream: bool) -> httpx.Response:
        client = self._async_client()
        plan = self._attempts(request, stream=stream, owned=self._owns_async)
        return await adrive(plan, client, self._pause, self._transport_errors)

    def _async_client(self) -> httpx.AsyncClient:
        with self._lock:
            if self._async_http is None:
                import httpx

                self._async_http = httpx.AsyncClient(timeout=self.timeout)
            return self._async_http

    async def _pause(self, seconds: float) -> None:
        if self._async_sleep is not None:
            await self._async_sleep(seconds)
            return
        import anyio  # httpx's own dependency; works under asyncio and trio

        await anyio.sleep(seconds)

    # -- answers -------------------------------------------------------------------------

    @property
    def _url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise self._error(response, 1, "with a body that is not JSON") from None

    def _accept(self, request: ModelRequest, body: Any) -> ModelResponse:
        output = request.output
        parsed, raw_args = parse_completion(
            body,
            model=self.model,
            structured=output is not None,
            taken=_taken(request),
            final_tool=output.tool if output is not None else None,  # never a request's own
        )
        if raw_args:
            with self._lock:
                self._raw_args.update(
                    (call_id, (raw, parse_arguments(raw))) for call_id, raw in raw_args.items()
                )
                while len(self._raw_args) > _MAX_ECHO:
                    del self._raw_args[next(iter(self._raw_args))]
        return parsed

    def _echo(self, call: ToolCall) -> str:
        """The arguments exactly as the model wrote them, so a server's prompt cache holds."""
        if INVALID_ARGUMENTS in call.args:
            return "{}"  # some servers re-parse history and fail on the broken original
        stored = self._raw_args.get(call.id)
        if stored is not None and stored[1] == call.args:
            return stored[0]
        return json.dumps(call.args, ensure_ascii=False)

    def _error(
        self,
        response: httpx.Response,
        attempts: int,
        what: str = "",
        kind: type[ModelError] = ModelError,
    ) -> ModelError:
        request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        message = (
            f"{self._shown}/chat/completions answered {what or f'HTTP {response.status_code}'}"
            f"{tries}: {http.detail(response.text)}{self._hint(response.status_code)}"
        )
        if kind is ContextWindowExceeded:
            tokens, limit = window.numbers(response.text)
            return ContextWindowExceeded(
                message,
                request_id=request_id,
                status=response.status_code,
                tokens=tokens,
                limit=limit,
            )
        return ModelError(
            message,
            request_id=request_id,
            status=response.status_code,
            kind="bad_reply" if what else None,
            retry_after=retry_after(response.headers),
        )

    def _unanswered(self, exc: Exception, attempts: int) -> ModelError:
        return ModelError(
            f"POST {self._shown}/chat/completions failed after {attempts} attempts: "
            f"{type(exc).__name__}: {exc}",
            kind="timeout" if isinstance(exc, self._timeouts) else "unavailable",
        )

    def _out_of_time(self, request: ModelRequest, attempts: int) -> ModelError:
        tries = f" after {attempts} attempts" if attempts else ""
        return ModelError(
            f"POST {self._shown}/chat/completions: the call's {request.timeout:.1f} s (the "
            f"run's deadline) ran "
            f"out{tries}",
            kind="timeout",
        )

    def _broken(self, exc: Exception, assembler: StreamAssembler) -> ModelError:
        return ModelError(
            f"the stream from {self._shown}/chat/completions failed after "
            f"{assembler.chunks} chunks: {type(exc).__name__}: {exc}",
            kind="timeout" if isinstance(exc, self._timeouts) else "unavailable",
        )

    def _hint(self, status: int) -> str:
        """What to try after a 404 from a base URL without a version (`/v1`) in its path."""
        path = urlsplit(self.base_url).path
        if status != 404 or any(p[:1] == "v" and p[1:2].isdigit() for p in path.split("/")):
            return ""
        return (
            f" (the base URL {self._shown!r} has no /v1: OpenAI-compatible servers answer "
            f"at <base>/v1/chat/completions, so try base_url={self._shown + '/v1'!r})"
        )

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Every error out of a call, with the credentials blanked out: the key and any
        put in the base URL, in its text and the exceptions behind it (a server may echo
        them)."""
        try:
            yield
        except AgentLoopsError as exc:
            _secrets.scrub(exc, self._secrets, _KEY)
            raise


def _taken(request: ModelRequest) -> set[str]:
    return {c.id for m in request.messages for c in m.tool_calls}


def _httpx_sse() -> Any:
    try:
        import httpx_sse
    except ImportError as exc:
        raise ConfigurationError(
            f"streaming from an OpenAI-compatible server needs httpx-sse: {_SSE_EXTRA}"
        ) from exc
    return httpx_sse


def _rebuild(base_url: str, model: str, settings: dict[str, Any]) -> OpenAICompatModel:
    return OpenAICompatModel(base_url, model, **settings)
