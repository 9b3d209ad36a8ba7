"""Cassettes under hostile conditions: a server that echoes the client's key, and files
edited by hand into shapes a replay cannot use."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloops import (
    AgentLoopsError,
    Cassette,
    CassetteError,
    CassetteRecorder,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatModel,
)

KEY = "sk-live-echoed-0123456789"


class Echo(http.server.BaseHTTPRequestHandler):
    """A careless server: a 401 whose body and headers repeat the credentials it got."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        sent = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
        body = json.dumps(
            {"error": {"message": f"invalid key {sent} for {self.path}", "type": "auth"}}
        ).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("x-echo-authorization", sent)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def ask(model: OpenAICompatModel) -> None:
    with pytest.raises(ModelError):
        model.complete(ModelRequest("", [Message.user("hi")]))


def test_a_key_the_server_echoes_never_reaches_the_file_without_redact(
    echo: str, tmp_path: Path
) -> None:
    path = tmp_path / "echo.json"
    with CassetteRecorder(path) as recorder:  # no redact=: the client's own key is enough
        model = OpenAICompatModel(f"{echo}/v1", "m", api_key=KEY, http_client=recorder.client())
        ask(model)
    text = path.read_text()
    assert KEY not in text
    [kept] = Cassette.load(path).exchanges
    assert kept.status == 401 and "[redacted]" in kept.body
    assert kept.headers["x-echo-authorization"] == "Bearer [redacted]"

    cassette = Cassette.load(path)  # replayed with another key: the same exchange
    other = OpenAICompatModel(
        f"{echo}/v1", "m", api_key="another-key-9876", http_client=cassette.client()
    )
    ask(other)
    cassette.assert_complete()


def test_a_key_in_the_url_or_an_api_key_header_is_redacted_everywhere(
    echo: str, tmp_path: Path
) -> None:
    path = tmp_path / "url.json"
    with CassetteRecorder(path) as recorder:
        client = recorder.client(headers={"x-api-key": KEY})
        answer = client.post(f"{echo}/v1/chat?key={KEY}&alt=json", json={"q": KEY})
        assert KEY in answer.text  # the server did echo it
    text = path.read_text()
    assert KEY not in text
    [kept] = Cassette.load(path).exchanges
    assert kept.url.endswith("/v1/chat?key=[redacted]&alt=json")
    assert kept.request == {"q": "[redacted]"}

    cassette = Cassette.load(path)
    with cassette.client(headers={"x-api-key": "a-different-key"}) as replay:
        again = replay.post(
            f"{echo}/v1/chat?key=a-different-key&alt=json", json={"q": "a-different-key"}
        )
    assert again.status_code == 401  # matched: its key is compared redacted, in URL and body


def test_a_short_dummy_key_does_not_mangle_the_recording(echo: str, tmp_path: Path) -> None:
    path = tmp_path / "dummy.json"
    with CassetteRecorder(path) as recorder:
        model = OpenAICompatModel(f"{echo}/v1", "m", api_key="x", http_client=recorder.client())
        ask(model)
    [kept] = Cassette.load(path).exchanges
    assert kept.request["model"] == "m" and "invalid key Bearer x" in kept.body


# -- a cassette edited by hand ------------------------------------------------------------

GOOD = {"method": "POST", "url": "http://llm.test/v1/chat/completions", "status": 200}


def damaged(tmp_path: Path, text: str) -> CassetteError:
    path = tmp_path / "hand-edited.json"
    path.write_text(text)
    with pytest.raises(CassetteError) as info:
        Cassette.load(path)
    assert isinstance(info.value, AgentLoopsError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(str(path))
    return info.value


def cassette_of(*exchanges: Any) -> str:
    return json.dumps({"version": 1, "meta": {}, "exchanges": list(exchanges)})


@pytest.mark.parametrize(
    ("exchange", "field", "says"),
    [
        ({k: v for k, v in GOOD.items() if k != "url"}, "url", "missing"),
        ({**GOOD, "stauts": 200}, "stauts", "not a field"),
        ({**GOOD, "status": "200"}, "status", "must be an int, got str"),
        ({**GOOD, "status": 0}, "status", "from 100 to 599"),
        ({**GOOD, "headers": ["x"]}, "headers", "must be an object"),
        ({**GOOD, "headers": {"retry-after": 5}}, "headers", "'retry-after' must be a string"),
        ({**GOOD, "body": {"choices": []}}, "body", "must be a string, got dict"),
        ({**GOOD, "method": 7}, "method", "must be a string"),
        ({**GOOD, "error": None}, "error", "must be a string, got null"),
        ("POST /v1", "", "an exchange is a JSON object"),
    ],
)
def test_a_damaged_exchange_is_named_with_its_field(
    tmp_path: Path, exchange: Any, field: str, says: str
) -> None:
    error = damaged(tmp_path, cassette_of({**GOOD, "body": "{}"}, exchange))
    assert (error.exchange, error.field) == (2, field)
    assert "exchange 2" in str(error) and says in str(error)
    if field:
        assert f"field {field!r}" in str(error)


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ('{"version": 1, "exchanges": [', "", "not JSON"),
        ("[]", "", "a cassette is a JSON object, got list"),
        ('{"version": 2, "exchanges": []}', "version", "not a version 1 cassette"),
        ('{"version": 1}', "exchanges", "'exchanges' must be a list, got null"),
        ('{"version": 1, "exchanges": {}}', "exchanges", "must be a list, got dict"),
        ('{"version": 1, "meta": [], "exchanges": []}', "meta", "'meta' must be an object"),
    ],
)
def test_a_damaged_file_is_a_cassette_error(
    tmp_path: Path, text: str, field: str, says: str
) -> None:
    error = damaged(tmp_path, text)
    assert (error.exchange, error.field) == (None, field) and says in str(error)


def test_a_checked_cassette_replays_an_error_exchange_without_a_status(tmp_path: Path) -> None:
    path = tmp_path / "timeout.json"
    path.write_text(cassette_of({**GOOD, "status": 0, "error": "ReadTimeout: slow"}))
    cassette = Cassette.load(path)
    with cassette.client() as client, pytest.raises(httpx.ReadTimeout, match="slow"):
        client.post(GOOD["url"])
