"""`OpenAICompatModel`: Chat Completions with tools over httpx, for Ollama, vLLM,
llama.cpp's `llama-server` and OpenAI itself.

httpx is imported when a client is built, not when agentloops is. Server quirks:

- Ollama ignores `tool_choice` (the model may answer instead of calling the tool you
  named), and wants an API key that it does not check.
- vLLM needs `--enable-auto-tool-choice --tool-call-parser <hermes|llama3_json|...>`
  for tool calls; without them every request with tools fails with a 400.
- llama.cpp's `llama-server` needs `--jinja` (or `--chat-template-file`) for tool calls,
  and reuses call ids across turns (this client makes them unique).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from agentloops.errors import ConfigurationError, ModelError
from agentloops.messages import ToolCall
from agentloops.model import ModelRequest, ModelResponse
from agentloops.providers import _openai_wire as wire
from agentloops.tools import INVALID_ARGUMENTS

if TYPE_CHECKING:
    import httpx

StructuredMode = Literal["auto", "json_schema", "prompt"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_WAIT = 60.0
_MAX_ECHO = 4096


class OpenAICompatModel:
    """A `ModelClient` for any server that speaks OpenAI's Chat Completions.

    Args:
        base_url: up to and including `/v1`, e.g. `http://localhost:11434/v1` (Ollama),
            `http://localhost:8000/v1` (vLLM), `http://localhost:8080/v1` (llama-server).
        model: the model name the server knows, e.g. `"qwen3:8b"`.
        api_key: sent as a bearer token; never logged nor put in an error message.
        http_client: your own `httpx.Client` (proxies, TLS, a mock transport); it is not
            closed by this client. By default one is made with `timeout`.
        max_tokens: the default output limit when a request sets none (`None`: the
            server's default).
        max_retries: retries after a 408/409/429/5xx answer or a connection error, with
            exponential backoff that honours `Retry-After`; then `ModelError`.
        timeout: seconds per request for the default HTTP client.
        structured: how to get JSON for a request with `output`: `"json_schema"` sends
            `response_format`; `"prompt"` puts the schema in the system prompt; `"auto"`
            (default) tries the first and falls back to the second for good when the
            server rejects `response_format` with a 400.
        extra_body: more fields for every request body, e.g. `{"temperature": 0.2}`.
        sleep: how to wait between retries (tests pass a recorder).

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
        max_tokens: int | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        structured: StructuredMode = "auto",
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if max_retries < 0:
            raise ConfigurationError(f"max_retries must be >= 0, got {max_retries}")
        if structured not in ("auto", "json_schema", "prompt"):
            raise ConfigurationError(
                f"structured must be auto, json_schema or prompt: {structured!r}"
            )
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens}")
        import httpx  # here, not at module level: `import agentloops` stays light

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.timeout = timeout
        self.structured: StructuredMode = structured
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep
        self._api_key = api_key
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._transport_errors = (httpx.TransportError,)
        self._lock = threading.Lock()
        self._raw_args: dict[str, tuple[str, dict[str, Any]]] = {}
        """Call id -> the arguments as written and as parsed (parsed once, not per request)."""

    def __repr__(self) -> str:  # no key here, ever
        return f"OpenAICompatModel({self.base_url!r}, {self.model!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # For process pools and Dask: rebuild from the settings, with a fresh HTTP client.
        if not self._owns_http:
            raise TypeError(
                "an OpenAICompatModel built with your own http_client cannot be pickled; "
                "build the model inside the function that runs on the worker"
            )
        settings = {
            "api_key": self._api_key,
            "max_tokens": self.max_tokens,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "structured": self.structured,
            "extra_body": self.extra_body,
            "sleep": self._sleep,
        }
        return (_rebuild, (self.base_url, self.model, settings))

    def close(self) -> None:
        """Close the HTTP client this model made (not one you passed in)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> OpenAICompatModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, request: ModelRequest) -> ModelResponse:
        """One Chat Completions call, with retries; see the class docstring.

        Raises:
            ModelError: the server failed after the retries, answered 4xx, or sent a
                reply without choices (`.status` and `.request_id` when known).
        """
        use_schema = request.output is not None and self.structured != "prompt"
        response, attempts = self._send(self._body(request, use_schema))
        if (
            use_schema
            and self.structured == "auto"
            and response.status_code in (400, 422)
            and "response_format" in response.text
        ):
            self.structured = "prompt"  # this server has no JSON-schema output: stop asking
            response, attempts = self._send(self._body(request, False))
        if response.status_code >= 400:
            raise self._error(response, f"HTTP {response.status_code}", attempts)
        try:
            body = response.json()
        except ValueError:
            raise self._error(response, "with a body that is not JSON", attempts) from None
        taken = {c.id for m in request.messages for c in m.tool_calls}
        parsed, raw_args = wire.parse_completion(
            body, model=self.model, structured=request.output is not None, taken=taken
        )
        if raw_args:
            with self._lock:
                self._raw_args.update(
                    (call_id, (raw, wire.parse_arguments(raw))) for call_id, raw in raw_args.items()
                )
                while len(self._raw_args) > _MAX_ECHO:
                    del self._raw_args[next(iter(self._raw_args))]
        return parsed

    def _body(self, request: ModelRequest, use_schema: bool) -> dict[str, Any]:
        system = request.system
        if request.output is not None and not use_schema:
            system = f"{system}\n\n{wire.schema_prompt(request)}".strip()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire.messages_to_wire(system, request.messages, self._echo),
            "stream": False,
        }
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if request.tools:
            body["tools"] = wire.tools_to_wire(request.tools)
            body["tool_choice"] = wire.tool_choice_to_wire(request.tool_choice)
        if use_schema:
            body["response_format"] = wire.response_format(request)
        body.update(self.extra_body)
        return body

    def _echo(self, call: ToolCall) -> str:
        """The arguments exactly as the model wrote them, so a server's prompt cache holds."""
        if INVALID_ARGUMENTS in call.args:
            return "{}"  # some servers re-parse history and fail on the broken original
        stored = self._raw_args.get(call.id)
        if stored is not None and stored[1] == call.args:
            return stored[0]
        return json.dumps(call.args, ensure_ascii=False)

    def _send(self, body: dict[str, Any]) -> tuple[httpx.Response, int]:
        """POST with bounded retries: the last answer, and how many attempts it took."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.max_retries + 1):
            try:
                response = self._http.post(url, json=body, headers=headers)
            except self._transport_errors as exc:
                if attempt == self.max_retries:
                    problem = self._redact(f"{type(exc).__name__}: {exc}")
                    raise ModelError(
                        f"POST {url} failed after {attempt + 1} attempts: {problem}"
                    ) from exc
                self._sleep(_backoff(attempt, None))
                continue
            if response.status_code not in _RETRY_STATUS or attempt == self.max_retries:
                return response, attempt + 1
            self._sleep(_backoff(attempt, response.headers))
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, response: httpx.Response, what: str, attempts: int) -> ModelError:
        request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
        detail = self._redact(_detail(response))
        tries = f" (after {attempts} attempts)" if attempts > 1 else ""
        return ModelError(
            f"{self.base_url}/chat/completions answered {what}{tries}: {detail}",
            request_id=request_id,
            status=response.status_code,
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[api key]") if self._api_key else text


def _rebuild(base_url: str, model: str, settings: dict[str, Any]) -> OpenAICompatModel:
    return OpenAICompatModel(base_url, model, **settings)


def _backoff(attempt: int, headers: Any) -> float:
    """`Retry-After` (seconds, milliseconds or a date) when the server sends one, capped at
    a minute; else 0.5 s doubling per attempt up to 8 s, with jitter so a batch of runs
    does not retry in lockstep."""
    if headers is not None:
        wait = _retry_after(headers)
        if wait is not None:
            return min(max(wait, 0.0), _MAX_WAIT)
    import random

    return min(0.5 * 2.0**attempt, 8.0) * random.uniform(0.75, 1.0)


def _retry_after(headers: Any) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import email.utils  # rare, and it pulls in the socket module

    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _detail(response: httpx.Response) -> str:
    """The server's own error message, or the start of its body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or "(empty body)"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:500]
    if isinstance(error, str):
        return error[:500]
    return json.dumps(body)[:500]
