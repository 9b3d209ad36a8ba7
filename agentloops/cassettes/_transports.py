"""The httpx transports behind `agentloops.cassettes`, and the recording forwarder.

Replay transports hand each request to `Cassette.answer`. Recording transports pass it on,
then tee the response body into the recorder as it streams by. `forward` is a loopback
HTTP server that records a separate program's traffic through a recorder.

Rule: this module knows a cassette and a recorder only by the methods it calls on them
(the Protocols below), so `cassettes/__init__` imports it and never the other way round.
"""

from __future__ import annotations

import http.server
import select
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

SLOT = "agentloops.cassette_slot"
"""Where a recorded response keeps the index of its exchange (in `response.extensions`)."""


class Cassette(Protocol):
    """What a replay transport asks of a `Cassette`."""

    def answer(self, request: httpx.Request) -> httpx.Response: ...


class CassetteRecorder(Protocol):
    """What a recording transport and `forward` ask of a `CassetteRecorder`."""

    def client(self, **kwargs: Any) -> httpx.Client: ...
    def _start(self, request: httpx.Request) -> int: ...
    def _abandon(self, slot: int) -> None: ...
    def _finish(
        self, slot: int, response: httpx.Response | None, raw: bytes, error: str
    ) -> None: ...


class _Replay(httpx.BaseTransport):
    def __init__(self, cassette: Cassette):
        self.cassette = cassette

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        return self.cassette.answer(request)


class _AsyncReplay(httpx.AsyncBaseTransport):
    def __init__(self, cassette: Cassette):
        self.cassette = cassette

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        return self.cassette.answer(request)


class _Recording(httpx.BaseTransport):
    def __init__(self, recorder: CassetteRecorder, inner: httpx.BaseTransport):
        self.recorder, self.inner = recorder, inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        slot = self.recorder._start(request)
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as exc:
            self.recorder._finish(slot, None, b"", f"{type(exc).__name__}: {exc}")
            raise
        stream = _Tap(response, lambda raw: self.recorder._finish(slot, response, raw, ""))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions={**response.extensions, SLOT: slot},
        )

    def close(self) -> None:
        self.inner.close()


class _AsyncRecording(httpx.AsyncBaseTransport):
    def __init__(self, recorder: CassetteRecorder, inner: httpx.AsyncBaseTransport):
        self.recorder, self.inner = recorder, inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        slot = self.recorder._start(request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self.recorder._finish(slot, None, b"", f"{type(exc).__name__}: {exc}")
            raise
        stream = _Tap(response, lambda raw: self.recorder._finish(slot, response, raw, ""))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions={**response.extensions, SLOT: slot},
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Tap(httpx.SyncByteStream, httpx.AsyncByteStream):
    """Passes a response's bytes through as they arrive and keeps a copy; reports the copy
    when the body is closed (read to the end, or abandoned part way)."""

    def __init__(self, response: httpx.Response, done: Callable[[bytes], None]):
        self.response, self.done = response, done
        self.chunks: list[bytes] = []
        self.reported = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.response.stream:  # type: ignore[union-attr]
            self.chunks.append(chunk)
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.stream:  # type: ignore[union-attr]
            self.chunks.append(chunk)
            yield chunk

    def close(self) -> None:
        self._report()
        self.response.close()

    async def aclose(self) -> None:
        self._report()
        await self.response.aclose()

    def _report(self) -> None:
        if not self.reported:
            self.reported = True
            self.done(b"".join(self.chunks))


@contextmanager
def forward(recorder: CassetteRecorder, target: str, *, timeout: float) -> Iterator[str]:
    """Serve on a free loopback port, forwarding to `target` through `recorder`; yields the
    base URL to use instead of `target`. Answers are buffered, then sent whole."""
    client = recorder.client(timeout=timeout)
    parts = urlsplit(target.rstrip("/"))
    origin = f"{parts.scheme}://{parts.netloc}"
    passed = ("content-type", "accept", "authorization")

    class Forward(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() in passed}
            try:
                answer = client.request(
                    self.command, origin + self.path, content=body, headers=headers
                )
            except httpx.TransportError as exc:  # recorded by the recorder as it happened
                self.send_error(502, f"{type(exc).__name__}: {exc}")
                return
            if _gone(self.connection):
                recorder._abandon(answer.extensions[SLOT])  # the program gave up waiting
                return
            try:
                self.send_response(answer.status_code)
                for name in ("content-type", "retry-after", "x-request-id"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)
            except (BrokenPipeError, ConnectionResetError):
                recorder._abandon(answer.extensions[SLOT])  # the program gave up waiting

        def log_message(self, *args: Any) -> None:
            pass  # quiet: the program's own output is what matters

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{parts.path}"
    finally:
        server.shutdown()
        server.server_close()
        client.close()


def _gone(connection: socket.socket) -> bool:
    """The other end closed the connection (a read would see end of file)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
