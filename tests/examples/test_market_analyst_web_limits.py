"""The Market Analyst web app against hostile bodies and pages: every route that reads a
body refuses one over the cap by its declared length before reading it (and a chunked one
as soon as it passes the cap), refuses JSON nested past the limit with a message instead
of a 500, and every answer carries the Content-Security-Policy the page runs under.

The body caps are tried on a real uvicorn server over a plain socket: Starlette's
TestClient hands the app the whole body at once, which would hide a server that reads it.
"""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from _analyst_app import serving
from market_analyst import models
from market_analyst.store import AnalystStore
from market_analyst.web.app import create_app
from market_analyst.web.guard import MAX_BODY_BYTES, MAX_DEPTH
from starlette.testclient import TestClient

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")

ROUTES = [
    ("POST", "/api/runs"),
    ("POST", "/api/runs/ma-none/decision"),
    ("PUT", "/api/profile"),
    ("POST", "/api/runs/ma-none/trade"),
    ("POST", "/api/trades/tr-none/decision"),
]


def _app(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    return create_app(store, models.build(models.ModelSettings(provider="offline")), user="t")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(_app(tmp_path), base_url="http://127.0.0.1") as test_client:
        yield test_client


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with serving(_app(tmp_path_factory.mktemp("served"))) as url:
        yield int(url.rstrip("/").rsplit(":", 1)[1])


def _answer(sock: socket.socket) -> tuple[int, dict[str, object]]:
    """The status and JSON body of the one answer on `sock` (the server closes it)."""
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:  # closed with our unread bytes: the answer came first
            piece = b""
        if not piece:
            break
        data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        length = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
        if length and len(body) >= int(length[0].split(b":")[1]):
            break
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def _head(method: str, path: str, port: int, *fields: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += ["Content-Type: application/json", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_body_declared_over_the_cap_is_refused_before_it_is_read(port, method, path) -> None:
    declared = 200 * 1024 * 1024
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head(method, path, port, f"Content-Length: {declared}"))
        sock.sendall(b'{"request": "' + b"x" * 1000)  # the other 200 MB never come
        status, body = _answer(sock)  # a server waiting for them would time out here
    assert status == 413
    assert body["error"] == (
        f"The body is {declared:,} bytes; at most {MAX_BODY_BYTES:,} are accepted."
    )


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_chunked_body_is_refused_once_it_passes_the_cap(port, method, path) -> None:
    chunk = b"x" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head(method, path, port, "Transfer-Encoding: chunked"))
        sock.sendall(b'd\r\n{"request": "\r\n')
        while sent < 4 * MAX_BODY_BYTES:  # never the terminating chunk
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered: it stopped reading
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        status, body = _answer(sock)
    assert status == 413
    assert body["error"] == f"The body is longer than {MAX_BODY_BYTES:,} bytes, the most accepted."


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_json_nested_past_the_limit_is_a_400_with_a_message(client, method, path) -> None:
    for depth in (MAX_DEPTH + 1, 100_000):  # past the limit; past Python's recursion limit
        deep = "[" * depth + "]" * depth
        response = client.request(
            method,
            path,
            content=f'{{"request": {deep}}}',
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 400, (depth, response.text)
        assert response.json()["error"] == (
            f"The body nests deeper than {MAX_DEPTH} levels; it is refused."
        )


def test_json_at_the_nesting_limit_reaches_the_route(client) -> None:
    inner = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    response = client.post(
        "/api/runs",
        content=f'{{"request": {inner}}}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400  # refused by the route's own check, not the parser
    assert response.json()["error"] == "'request' must be a string"


def test_a_body_just_under_the_cap_reaches_the_route(client) -> None:
    text = "x" * (MAX_BODY_BYTES - 100)
    large = client.post("/api/runs", json={"request": text})
    assert large.status_code == 400 and "at most 2000" in large.json()["error"]


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/static/style.css", "/api/info"])
def test_every_answer_carries_the_content_security_policy(client, path) -> None:
    response = client.get(path)
    assert response.status_code == 200
    policy = dict(
        part.strip().split(" ", 1)
        for part in response.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'" and policy["frame-ancestors"] == "'none'"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_refusals_carry_the_policy_too(client) -> None:
    refused = client.post("/api/runs", content=b"{", headers={"Content-Type": "application/json"})
    assert refused.status_code == 400 and "content-security-policy" in refused.headers
    missing = client.get("/static/nope.js")
    assert missing.status_code == 404 and "content-security-policy" in missing.headers
