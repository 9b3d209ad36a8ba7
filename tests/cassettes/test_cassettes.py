"""Cassettes: record exchanges through a transport, replay them, and say what differs."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentloops import (
    Cassette,
    CassetteMismatch,
    CassetteRecorder,
    Message,
    ModelRequest,
    OpenAICompatModel,
    ReActLoop,
    TextDelta,
    tool,
)

BASE = "http://llm.test/v1"
KEY = "sk-SECRET-cassette-0001"


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def reply(body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=body, headers={"x-request-id": "req-1", "date": "today"})


def text_reply(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


def tool_reply(city: str) -> dict[str, Any]:
    call = {"id": "c1", "function": {"name": "weather", "arguments": json.dumps({"city": city})}}
    message = {"content": None, "tool_calls": [call]}
    return {"model": "m", "choices": [{"message": message, "finish_reason": "tool_calls"}]}


class FakeServer:
    """Answers in order from a script; records nothing itself."""

    def __init__(self, *answers: httpx.Response | Exception):
        self.answers = list(answers)
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def record_react(path: Path, task: str = "Weather in Oslo?") -> tuple[str, FakeServer]:
    server = FakeServer(reply(tool_reply("Oslo")), reply(text_reply("18C in Oslo.")))
    with CassetteRecorder(
        path, meta={"loop": "react"}, redact=[KEY], transport=httpx.MockTransport(server)
    ) as recorder:
        model = OpenAICompatModel(BASE, "m", api_key=KEY, http_client=recorder.client())
        answer = ReActLoop(model, [weather]).run(task).answer
    return answer, server


def test_a_recorded_run_replays_without_the_server_and_keeps_no_secret(tmp_path):
    path = tmp_path / "cassettes" / "react.json"
    live, server = record_react(path)
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent...
    text = path.read_text()
    assert KEY not in text and "authorization" not in text.lower()  # ...and never kept
    assert '"date"' not in text and "x-request-id" in text

    cassette = Cassette.load(path)
    assert cassette.meta == {"loop": "react"} and len(cassette.exchanges) == 2
    model = OpenAICompatModel(BASE, "m", api_key="another-key", http_client=cassette.client())
    replayed = ReActLoop(model, [weather]).run("Weather in Oslo?")
    assert replayed.answer == live == "18C in Oslo."
    assert replayed.usage.input_tokens == 5
    cassette.assert_complete()


def test_a_different_body_fails_with_a_diff_of_the_two(tmp_path):
    path = tmp_path / "react.json"
    record_react(path)
    cassette = Cassette.load(path)
    model = OpenAICompatModel(BASE, "m", http_client=cassette.client())
    with pytest.raises(CassetteMismatch) as info:
        ReActLoop(model, [weather]).run("Weather in Rome?")
    message = str(info.value)
    assert message.startswith(f"{path}: request 1 differs from the recording")
    assert '-      "content": "Weather in Oslo?",' in message
    assert '+      "content": "Weather in Rome?",' in message
    assert "--- recorded body" in message and "+++ sent body" in message


def test_a_different_url_or_an_extra_request_is_named(tmp_path):
    path = tmp_path / "react.json"
    record_react(path)
    cassette = Cassette.load(path)
    other = OpenAICompatModel("http://elsewhere.test/v1", "m", http_client=cassette.client())
    with pytest.raises(CassetteMismatch, match=r"sent:     POST http://elsewhere\.test/v1/chat"):
        other.complete(ModelRequest("", [Message.user("x")]))

    cassette = Cassette.load(path)
    model = OpenAICompatModel(BASE, "m", http_client=cassette.client())
    ReActLoop(model, [weather]).run("Weather in Oslo?")
    with pytest.raises(
        CassetteMismatch, match=r"request 3 .* is not in the cassette, which holds 2"
    ):
        model.complete(ModelRequest("", [Message.user("one more")]))


def test_assert_complete_says_what_was_left(tmp_path):
    path = tmp_path / "react.json"
    record_react(path)
    cassette = Cassette.load(path)
    with pytest.raises(CassetteMismatch, match="0 of 2 exchanges were replayed; the next one"):
        cassette.assert_complete()


def test_a_transport_error_is_recorded_and_replayed_as_the_same_error(tmp_path):
    path = tmp_path / "flaky.json"
    server = FakeServer(httpx.ConnectError("refused"), reply(text_reply("back")))
    recorder = CassetteRecorder(path, transport=httpx.MockTransport(server))
    live = OpenAICompatModel(BASE, "m", http_client=recorder.client(), sleep=lambda s: None)
    assert live.complete(ModelRequest("", [Message.user("hi")])).message.text == "back"
    recorder.save()
    cassette = Cassette.load(path)
    assert cassette.exchanges[0].error == "ConnectError: refused"
    waits: list[float] = []
    model = OpenAICompatModel(BASE, "m", http_client=cassette.client(), sleep=waits.append)
    assert model.complete(ModelRequest("", [Message.user("hi")])).message.text == "back"
    assert len(waits) == 1
    cassette.assert_complete()


def test_a_compressed_reply_is_kept_as_text(tmp_path):
    body = json.dumps(text_reply("zipped")).encode()
    headers = {"content-encoding": "gzip", "content-type": "application/json"}
    server = FakeServer(httpx.Response(200, headers=headers, content=gzip.compress(body)))
    recorder = CassetteRecorder(transport=httpx.MockTransport(server))
    model = OpenAICompatModel(BASE, "m", http_client=recorder.client())
    assert model.complete(ModelRequest("", [Message.user("hi")])).message.text == "zipped"
    assert server.seen[0].headers["accept-encoding"] == "identity"
    recorder.save(tmp_path / "gz.json")
    kept = Cassette.load(tmp_path / "gz.json").exchanges[0]
    assert json.loads(kept.body) == text_reply("zipped")
    assert "content-encoding" not in kept.headers


def test_save_needs_a_path_and_load_checks_the_version(tmp_path):
    with pytest.raises(ValueError, match="needs a path"):
        CassetteRecorder().save()
    (tmp_path / "old.json").write_text('{"version": 0, "exchanges": []}')
    with pytest.raises(ValueError, match="not a version 1 cassette"):
        Cassette.load(tmp_path / "old.json")


SSE = (
    'data: {"choices": [{"delta": {"content": "Hel"}}]}\n\n'
    'data: {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}\n\n'
    "data: [DONE]\n\n"
)


@pytest.mark.anyio
async def test_streams_record_and_replay_sync_and_async(tmp_path):
    def events(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=SSE)

    mock = httpx.MockTransport(events)
    recorder = CassetteRecorder(tmp_path / "s.json", transport=mock, async_transport=mock)
    live = OpenAICompatModel(
        BASE, "m", http_client=recorder.client(), async_http_client=recorder.async_client()
    )
    request = ModelRequest("", [Message.user("hi")])
    sync_items = list(live.stream(request))
    async_items = [i async for i in live.astream(request)]
    recorder.save()

    cassette = Cassette.load(tmp_path / "s.json")
    assert [e.body for e in cassette.exchanges] == [SSE, SSE]
    model = OpenAICompatModel(
        BASE, "m", http_client=cassette.client(), async_http_client=cassette.async_client()
    )
    replayed = [i async for i in model.astream(request)] + list(model.stream(request))
    texts = [i.text for i in replayed if isinstance(i, TextDelta)]
    assert texts == ["Hel", "lo", "Hel", "lo"]
    assert replayed[2] == sync_items[2] == async_items[2]
    cassette.assert_complete()


def test_a_stream_abandoned_part_way_keeps_what_arrived(tmp_path):
    def events(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=SSE)

    recorder = CassetteRecorder(transport=httpx.MockTransport(events))
    model = OpenAICompatModel(BASE, "m", http_client=recorder.client())
    items = model.stream(ModelRequest("", [Message.user("hi")]))
    next(items)
    items.close()
    kept = recorder.cassette.exchanges[0]
    assert kept.status == 200 and kept.body.startswith('data: {"choices"')


def test_forward_records_a_program_that_builds_its_own_client(tmp_path):
    server = FakeServer(reply(text_reply("through the forwarder")))
    recorder = CassetteRecorder(tmp_path / "f.json", transport=httpx.MockTransport(server))
    with recorder.forward(BASE) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        program = OpenAICompatModel(url, "m", api_key=KEY)  # its own client, as a CLI's
        answer = program.complete(ModelRequest("", [Message.user("hi")]))
    assert answer.message.text == "through the forwarder"
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
    recorder.save()
    cassette = Cassette.load(tmp_path / "f.json")
    assert cassette.exchanges[0].url == f"{BASE}/chat/completions"
    model = OpenAICompatModel(BASE, "m", http_client=cassette.client())
    assert model.complete(ModelRequest("", [Message.user("hi")])) == answer
    cassette.assert_complete()


@pytest.mark.slow
def test_an_answer_the_program_stopped_waiting_for_is_recorded_as_a_timeout(tmp_path):
    gate = threading.Event()

    def slow_then_fast(request: httpx.Request) -> httpx.Response:
        if gate.is_set():
            return reply(text_reply("in time"))
        gate.set()
        time.sleep(1.0)  # longer than the program waits
        return reply(text_reply("too late"))

    recorder = CassetteRecorder(transport=httpx.MockTransport(slow_then_fast))
    with recorder.forward(BASE) as url:
        program = OpenAICompatModel(url, "m", timeout=0.3, sleep=lambda s: time.sleep(1.2))
        live = program.complete(ModelRequest("", [Message.user("hi")]))
    assert live.message.text == "in time"
    first, second = recorder.cassette.exchanges
    assert first.error.startswith("ReadTimeout") and second.status == 200
    replay = Cassette(recorder.cassette.exchanges)
    waits: list[float] = []
    model = OpenAICompatModel(BASE, "m", http_client=replay.client(), sleep=waits.append)
    assert model.complete(ModelRequest("", [Message.user("hi")])) == live
    assert len(waits) == 1
    replay.assert_complete()
