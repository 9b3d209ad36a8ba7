"""Recorded HTTP traffic ("cassettes"): record a real session once, replay it in tests.

A `CassetteRecorder` is an httpx transport that passes each request to the network and
keeps the exchange; `save()` writes them to a JSON file. A `Cassette` loaded from that
file is a transport that answers the same requests, in order, without a server, and
raises `CassetteMismatch` with a diff when the code sends anything else. Matching is
strict on the method, the URL and the JSON body, and ignores headers.

    recorder = CassetteRecorder("tests/cassettes/react.json")
    model = OpenAICompatModel(url, "smollm2", http_client=recorder.client())
    ReActLoop(model, tools).run(task)
    recorder.save()

    cassette = Cassette.load("tests/cassettes/react.json")
    model = OpenAICompatModel(url, "smollm2", http_client=cassette.client())
    ReActLoop(model, tools).run(task)  # the same requests, the recorded replies
    cassette.assert_complete()

Rule: a kit over httpx alone; it knows no loop, model or provider.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from agentloops.cassettes import _credentials
from agentloops.cassettes._exchange import VERSION, Exchange, read
from agentloops.cassettes._transports import (
    _AsyncRecording,
    _AsyncReplay,
    _Recording,
    _Replay,
    forward,
)
from agentloops.errors import CassetteError

__all__ = ["Cassette", "CassetteError", "CassetteMismatch", "CassetteRecorder", "Exchange"]

_DROPPED_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
    | {"date", "set-cookie"}
)
"""Headers not kept: they describe the bytes on the wire or change on every run."""


class CassetteMismatch(AssertionError):
    """The code sent a request the cassette does not hold at this point."""


class Cassette:
    """Recorded exchanges that answer requests in order, as an httpx transport.

    Use `client()` / `async_client()` (or `transport()` / `async_transport()` in your own
    client). The sync and async transports share one position in the recording.

    Args:
        exchanges: the recording.
        meta: anything the recording wants to say about itself (model, task, server).
        name: how error messages name it (the file's path when loaded).
    """

    def __init__(
        self,
        exchanges: Iterable[Exchange] = (),
        *,
        meta: dict[str, Any] | None = None,
        name: str = "cassette",
    ):
        self.exchanges = list(exchanges)
        self.meta = dict(meta or {})
        self.name = name
        self.used = 0
        """How many exchanges have been replayed."""
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a cassette written by `CassetteRecorder.save`, checking every exchange.

        Raises:
            CassetteError: the file is not JSON or not a version 1 cassette, or an
                exchange has a missing, unknown or ill-typed field (it names which).
        """
        meta, exchanges = read(Path(path).read_text(encoding="utf-8"), str(path))
        return cls(exchanges, meta=meta, name=str(path))

    def to_dict(self) -> dict[str, Any]:
        exchanges = [dataclasses.asdict(e) for e in self.exchanges]
        return {"version": VERSION, "meta": self.meta, "exchanges": exchanges}

    def transport(self) -> httpx.BaseTransport:
        return _Replay(self)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return _AsyncReplay(self)

    def client(self, **kwargs: Any) -> httpx.Client:
        """An `httpx.Client` that replays; `kwargs` go to `httpx.Client`."""
        return httpx.Client(transport=self.transport(), **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.async_transport(), **kwargs)

    def assert_complete(self) -> None:
        """Raise `CassetteMismatch` unless every recorded exchange was replayed."""
        if self.used != len(self.exchanges):
            left = self.exchanges[self.used]
            raise CassetteMismatch(
                f"{self.name}: {self.used} of {len(self.exchanges)} exchanges were replayed; "
                f"the next one expected was {left.method} {left.url}"
            )

    def answer(self, request: httpx.Request) -> httpx.Response:
        """The recorded answer to `request` (the next exchange), or `CassetteMismatch`.

        The request's credentials are compared as recorded (redacted), so a replay
        matches whatever key its client holds."""
        found = _credentials.secrets(request)
        url = _credentials.clean(_credentials.url(str(request.url)), found)
        sent = Exchange(
            method=request.method, url=url, request=_credentials.clean_value(_body(request), found)
        )
        with self._lock:
            number = self.used + 1
            if self.used >= len(self.exchanges):
                raise CassetteMismatch(
                    f"{self.name}: request {number} ({sent.method} {sent.url}) is not in the "
                    f"cassette, which holds {len(self.exchanges)} exchanges\n"
                    + _diff(None, sent.request)
                )
            expected = self.exchanges[self.used]
            if (sent.method, sent.url, sent.request) != (
                expected.method,
                expected.url,
                expected.request,
            ):
                raise CassetteMismatch(_mismatch(self.name, number, expected, sent))
            self.used += 1
        if expected.error:
            kind, _, message = expected.error.partition(": ")
            error = getattr(httpx, kind, None)
            if not (isinstance(error, type) and issubclass(error, httpx.TransportError)):
                error = httpx.TransportError
            raise error(message, request=request)
        return httpx.Response(
            expected.status,
            headers=expected.headers,
            content=expected.body.encode("utf-8"),
            request=request,
        )


class CassetteRecorder:
    """Records every exchange that goes through its transports, to `save()` as a cassette.

    Requests go on to `transport` (by default a plain `httpx.HTTPTransport`), asking for
    an uncompressed body so the file stays readable. Request headers are never kept, and
    the client's own credentials never reach the file, whatever `redact` says: the values
    of its `Authorization`, `x-api-key` and other credential headers, and of the URL's
    password and credential query parameters (`?key=`), are replaced by `"[redacted]"`
    wherever they appear: in URLs, request and response bodies, response headers and
    errors (a server that echoes the key). Each string in `redact` is replaced too.

    Args:
        path: where `save()` writes by default (it makes the folder).
        meta: stored with the exchanges (`Cassette.meta` when loaded).
        redact: secrets to keep out of the file.
        transport: the sync transport to record through.
        async_transport: the async one.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        meta: dict[str, Any] | None = None,
        redact: Iterable[str] = (),
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.path = Path(path) if path is not None else None
        self.cassette = Cassette(meta=meta, name=str(path or "recording"))
        self._redact = {s for s in redact if s}
        """What is kept out of the file: `redact`, and each credential the client sends."""
        self._inner = transport
        self._async_inner = async_transport
        self._lock = threading.Lock()

    def transport(self) -> httpx.BaseTransport:
        return _Recording(self, self._inner or httpx.HTTPTransport())

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return _AsyncRecording(self, self._async_inner or httpx.AsyncHTTPTransport())

    def forward(self, target: str, *, timeout: float = 600.0) -> AbstractContextManager[str]:
        """Record a program you cannot hand a client to (a command line, another language).

        A context manager: a loopback HTTP server that forwards every request to `target`
        (the real base URL) through this recorder; it yields its own base URL to give the
        program instead. It records what the program saw: an answer the program stopped
        waiting for (its own timeout) is recorded as a `ReadTimeout`, so a replay sends
        the program's retry the recorded answer, as happened live.

        Example:
            >>> recorder = CassetteRecorder()
            >>> with recorder.forward("http://127.0.0.1:8080/v1") as url:
            ...     url.endswith("/v1")
            True
        """
        return forward(self, target, timeout=timeout)

    def client(self, **kwargs: Any) -> httpx.Client:
        """An `httpx.Client` that records; `kwargs` go to `httpx.Client`."""
        return httpx.Client(transport=self.transport(), **kwargs)

    def async_client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.async_transport(), **kwargs)

    def save(self, path: str | Path | None = None) -> Path:
        """Write the cassette as JSON (one exchange per request, in the order sent)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("save() needs a path: none was given to CassetteRecorder")
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:  # a credential learned later is kept out of earlier exchanges too
            self.cassette.exchanges = [self._scrubbed(e) for e in self.cassette.exchanges]
        text = json.dumps(self.cassette.to_dict(), indent=1, ensure_ascii=False)
        target.write_text(text + "\n", encoding="utf-8")
        return target

    def __enter__(self) -> CassetteRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.save()

    def _start(self, request: httpx.Request) -> int:
        """Keep a place for this exchange: the order is the order requests were sent."""
        request.headers["accept-encoding"] = "identity"
        with self._lock:
            self._redact |= _credentials.secrets(request)
            url = self._clean(_credentials.url(str(request.url)))
            body = _credentials.clean_value(_body(request), self._redact)
            self.cassette.exchanges.append(Exchange(method=request.method, url=url, request=body))
            return len(self.cassette.exchanges) - 1

    def _abandon(self, slot: int) -> None:
        """The client stopped waiting for this answer: record what it saw."""
        with self._lock:
            sent = self.cassette.exchanges[slot]
            message = "ReadTimeout: the client stopped waiting for the answer"
            self.cassette.exchanges[slot] = Exchange(
                method=sent.method, url=sent.url, request=sent.request, error=message
            )

    def _finish(self, slot: int, response: httpx.Response | None, raw: bytes, error: str) -> None:
        with self._lock:
            sent = self.cassette.exchanges[slot]
            if response is None:
                done = dataclasses.replace(sent, error=self._clean(error))
            else:
                # Decoded through httpx, in case the server compressed it anyway.
                text = httpx.Response(200, headers=response.headers, content=raw).text
                headers = {
                    k: self._clean(v)
                    for k, v in response.headers.items()
                    if k.lower() not in _DROPPED_HEADERS
                }
                done = dataclasses.replace(
                    sent, status=response.status_code, headers=headers, body=self._clean(text)
                )
            self.cassette.exchanges[slot] = done

    def _clean(self, text: str) -> str:
        return _credentials.clean(text, self._redact)

    def _scrubbed(self, e: Exchange) -> Exchange:
        """`e` with every secret known now replaced."""
        found = self._redact
        return dataclasses.replace(
            e,
            url=self._clean(e.url),
            request=_credentials.clean_value(e.request, found),
            headers={k: self._clean(v) for k, v in e.headers.items()},
            body=self._clean(e.body),
            error=self._clean(e.error),
        )


def _body(request: httpx.Request) -> Any:
    text = request.content.decode("utf-8", errors="replace")
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _mismatch(name: str, number: int, expected: Exchange, sent: Exchange) -> str:
    lines = [f"{name}: request {number} differs from the recording"]
    if (sent.method, sent.url) != (expected.method, expected.url):
        lines.append(f"  recorded: {expected.method} {expected.url}")
        lines.append(f"  sent:     {sent.method} {sent.url}")
    if sent.request != expected.request:
        lines.append(_diff(expected.request, sent.request))
    return "\n".join(lines)


def _diff(recorded: Any, sent: Any, limit: int = 80) -> str:
    """A unified diff of the two bodies, pretty-printed with sorted keys."""

    def lines(value: Any) -> list[str]:
        if value is None:
            return []
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    diff = list(
        difflib.unified_diff(
            lines(recorded), lines(sent), "recorded body", "sent body", lineterm="", n=2
        )
    )
    if len(diff) > limit:
        diff = [*diff[:limit], f"... {len(diff) - limit} more diff lines"]
    return "\n".join(diff)
