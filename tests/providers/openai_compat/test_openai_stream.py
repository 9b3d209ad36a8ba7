"""Streaming (`stream`, `astream`) and `acomplete` against respx-mocked server-sent events."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from _openai_fakes import BASE, ask, call, completion, ok, sent, weather

from agentloops import (
    ConfigurationError,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    OpenAICompatModel,
    OutputSchema,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

pytestmark = pytest.mark.anyio

USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 8}}


def chunk(*, content: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    if content is not None:
        delta["content"] = content
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "qwen3:8b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def fragment(index: int | None, arguments: str, id: str | None = None, name: str | None = None):
    piece: dict[str, Any] = {"function": {"arguments": arguments}}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece["id"], piece["type"] = id, "function"
    if name is not None:
        piece["function"]["name"] = name
    return chunk(tool_calls=[piece])


def sse_bytes(*events: Any) -> bytes:
    lines = []
    for e in events:
        data = e if isinstance(e, str) else json.dumps(e)
        lines.append(f"data: {data}\n\n")
    return "".join(lines).encode()


def sse(*events: Any) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=sse_bytes(*events)
    )


def usage_chunk() -> dict[str, Any]:
    return {"id": "chatcmpl-1", "model": "qwen3:8b", "choices": [], "usage": USAGE}


async def drain(model: OpenAICompatModel, request: ModelRequest, way: str) -> list[Any]:
    if way == "stream":
        return list(model.stream(request))
    return [item async for item in model.astream(request)]


@pytest.fixture(params=["stream", "astream"])
def way(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_text_arrives_in_deltas_then_the_response_complete_would_give(server, model, way):
    server.side_effect = [
        sse(
            chunk(role="assistant", content=""),
            chunk(reasoning_content="Norway's capital"),
            chunk(content="Os"),
            chunk(content="lo."),
            chunk(finish="stop"),
            usage_chunk(),
            "[DONE]",
        ),
        ok(completion("Oslo.", usage=USAGE)),
    ]
    items = await drain(model, ask(), way)
    assert [type(i) for i in items] == [ThinkingDelta, TextDelta, TextDelta, ModelResponse]
    assert [i.text for i in items[:3]] == ["Norway's capital", "Os", "lo."]
    assert items[-1] == model.complete(ask())
    assert items[-1].usage == Usage(input_tokens=32, output_tokens=9, cache_read_tokens=8)
    body = sent(server, 0)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_call_fragments_split_mid_json_are_joined_by_index(server, model, way):
    oslo, rome = '{"city": "Oslo"}', '{"city": "Rome"}'
    server.side_effect = [
        sse(
            fragment(0, "", id="call_a", name="weather"),
            fragment(0, '{"ci'),
            fragment(1, '{"city"', id="call_b", name="weather"),
            fragment(0, 'ty": "Os'),
            fragment(1, ': "Rome"}'),
            fragment(0, 'lo"}'),
            chunk(finish="tool_calls"),
            usage_chunk(),
            "[DONE]",
        ),
        ok(
            completion(
                calls=[call("weather", oslo, "call_a"), call("weather", rome, "call_b")],
                finish="tool_calls",
                usage=USAGE,
            )
        ),
    ]
    items = await drain(model, ask(tools=[weather.spec()]), way)
    deltas, final = items[:-1], items[-1]
    assert all(type(d) is ToolCallDelta for d in deltas)
    assert [(d.index, d.call_id, d.name) for d in deltas if d.call_id] == [
        (0, "call_a", "weather"),
        (1, "call_b", "weather"),
    ]
    joined = {i: "".join(d.arguments for d in deltas if d.index == i) for i in (0, 1)}
    assert joined == {0: oslo, 1: rome}
    assert final == model.complete(ask(tools=[weather.spec()]))
    assert final.message.tool_calls == [
        ToolCall("call_a", "weather", {"city": "Oslo"}),
        ToolCall("call_b", "weather", {"city": "Rome"}),
    ]


async def test_ids_and_names_repeated_in_every_chunk_are_taken_once(server, model, way):
    """llama-cpp-python's server repeats the call's id and name in each chunk."""
    pieces = ["{", '"city"', ': "Lima"', "}", ""]
    server.side_effect = [
        sse(
            *(fragment(0, p, id="call__0_weather", name="weather") for p in pieces),
            chunk(finish="tool_calls"),
            "[DONE]",
        )
    ]
    final = (await drain(model, ask(), way))[-1]
    assert final.message.tool_calls == [ToolCall("call__0_weather", "weather", {"city": "Lima"})]
    assert final.usage == Usage()  # that server sends no usage chunk
    assert not final.usage_reported  # and the response says so


async def test_calls_without_an_index_are_told_apart_by_id(server, model, way):
    server.side_effect = [
        sse(
            fragment(None, '{"city": ', id="c1", name="weather"),
            fragment(None, '"Oslo"}'),
            fragment(None, '{"city": "Rome"}', id="c2", name="weather"),
            chunk(finish="tool_calls"),
            "[DONE]",
        )
    ]
    final = (await drain(model, ask(), way))[-1]
    assert [c.args["city"] for c in final.message.tool_calls] == ["Oslo", "Rome"]


async def test_a_new_id_on_a_reused_index_is_a_second_call_not_a_merged_one(server, model, way):
    """A server that numbers every call 0: the second call is kept, apart from the first."""
    server.side_effect = [
        sse(
            fragment(0, '{"city": ', id="c1", name="weather"),
            fragment(0, '"Oslo"}'),
            fragment(0, '{"city": ', id="c2", name="weather"),
            fragment(0, '"Rome"}'),
            fragment(1, '{"city": "Lima"}', id="c3", name="weather"),
            chunk(finish="tool_calls"),
            "[DONE]",
        )
    ]
    items = await drain(model, ask(), way)
    final = items[-1]
    assert final.message.tool_calls == [
        ToolCall("c1", "weather", {"city": "Oslo"}),
        ToolCall("c2", "weather", {"city": "Rome"}),
        ToolCall("c3", "weather", {"city": "Lima"}),
    ]
    deltas = [d for d in items if isinstance(d, ToolCallDelta)]
    assert [(d.index, d.call_id) for d in deltas if d.call_id] == [(0, "c1"), (1, "c2"), (2, "c3")]
    joined = {i: "".join(d.arguments for d in deltas if d.index == i) for i in (0, 1, 2)}
    assert joined == {0: '{"city": "Oslo"}', 1: '{"city": "Rome"}', 2: '{"city": "Lima"}'}


async def test_a_call_id_already_in_the_transcript_is_renamed_in_the_delta_too(server, model, way):
    history = [
        Message.user("go"),
        Message("assistant", (ToolCall("call_0", "weather", {"city": "A"}),)),
        Message.user("again"),
    ]
    server.side_effect = [
        sse(fragment(0, '{"city": "B"}', id="call_0", name="weather"), chunk(finish="tool_calls"))
    ]
    items = await drain(model, ModelRequest("", history), way)
    assert items[0].call_id == items[-1].message.tool_calls[0].id == "call_0_d1"


async def test_a_call_with_no_id_gets_one_that_the_delta_and_response_share(server, model, way):
    server.side_effect = [sse(fragment(0, "{}", name="weather"), "[DONE]")]
    items = await drain(model, ask(), way)
    assert items[0].call_id.startswith("call_")
    assert items[-1].message.tool_calls[0].id == items[0].call_id


@pytest.mark.parametrize(
    "events",
    [
        [fragment(0, '{"city": "Os', id="c1", name="weather")],  # cut mid-arguments
        [chunk(content="half an ans")],
        [],
    ],
)
async def test_a_stream_cut_off_raises_and_never_yields_a_response(server, model, way, events):
    server.side_effect = [sse(*events)]
    items: list[Any] = []
    with pytest.raises(ModelError, match="stream ended before the reply was complete"):
        if way == "stream":
            items.extend(model.stream(ask()))
        else:
            async for item in model.astream(ask()):
                items.append(item)
    assert not any(isinstance(i, ModelResponse) for i in items)


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ("{not json", "stream chunk 2 is not JSON"),
        (
            {"choices": [{"delta": "text"}]},
            "stream chunk 2 of an unexpected shape: choices.0.delta",
        ),
        (
            {"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]},
            "choices.0.delta.tool_calls.0.index",
        ),
        ({"error": {"message": "model crashed"}}, "error in stream chunk 2: model crashed"),
    ],
)
async def test_a_malformed_or_error_chunk_is_a_model_error(server, model, way, event, says):
    server.side_effect = [sse(chunk(content="a"), event, chunk(finish="stop"), "[DONE]")]
    with pytest.raises(ModelError) as info:
        await drain(model, ask(), way)
    assert says in str(info.value)


async def test_failures_before_the_first_byte_are_retried(server, model, sleeps, way):
    server.side_effect = [
        httpx.ConnectError("refused"),
        httpx.Response(529, headers={"retry-after": "3"}, json={"error": "overloaded"}),
        sse(chunk(content="up"), chunk(finish="stop"), "[DONE]"),
    ]
    items = await drain(model, ask(), way)
    assert items[-1].message.text == "up"
    assert len(sleeps) == 2 and sleeps[1] == 3.0


async def test_a_4xx_before_the_stream_is_a_model_error_quoting_the_body(server, model, way):
    server.side_effect = [httpx.Response(404, json={"error": {"message": "no model qwen9"}})]
    with pytest.raises(ModelError, match="HTTP 404: no model qwen9") as info:
        await drain(model, ask(), way)
    assert info.value.status == 404


async def test_a_refused_format_falls_back_before_the_stream_starts(server, model, way):
    server.side_effect = [
        httpx.Response(500, json={"error": {"message": "response_format: json_object only"}}),
        sse(chunk(content='{"a": 1}'), chunk(finish="stop"), "[DONE]"),
    ]
    request = ask(output=OutputSchema("A", {"type": "object"}))
    final = (await drain(model, request, way))[-1]
    assert final.output == {"a": 1}
    assert sent(server)["response_format"]["type"] == "json_object"


async def test_a_reply_that_is_not_a_stream_is_a_model_error(server, model, way):
    server.side_effect = [ok(completion("not streamed"))]
    with pytest.raises(ModelError, match="text/event-stream"):
        await drain(model, ask(), way)


class _Stall(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that sends some events, then stalls (a read timeout), and says if it was closed."""

    def __init__(self, head: bytes, *, stall: bool = True):
        self.head, self.stall, self.closed = head, stall, False

    def __iter__(self) -> Iterator[bytes]:
        yield self.head
        if self.stall:
            raise httpx.ReadTimeout("no bytes for 120 s")
        yield sse_bytes(chunk(content="more"), chunk(finish="stop"), "[DONE]")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self:
            yield piece

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def stalled(body: _Stall) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)


async def test_a_stalled_stream_is_a_model_error_and_is_not_retried(server, model, sleeps, way):
    body = _Stall(sse_bytes(chunk(content="par"), chunk(content="tial")))
    server.side_effect = [stalled(body)]
    with pytest.raises(ModelError, match="failed after 2 chunks: ReadTimeout: no bytes"):
        await drain(model, ask(), way)
    assert server.call_count == 1 and sleeps == [] and body.closed


async def test_closing_the_stream_early_closes_the_http_response(server, model, way):
    body = _Stall(sse_bytes(chunk(content="first")), stall=False)
    server.side_effect = [stalled(body)]
    if way == "stream":
        items = model.stream(ask())
        assert next(items).text == "first"
        items.close()
    else:
        aitems = model.astream(ask())
        assert (await aitems.__anext__()).text == "first"
        await aitems.aclose()
    assert body.closed


async def test_without_httpx_sse_streaming_names_the_extra(server, model, way, monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx_sse", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'agentloops-kit\[sse\]'"):
        await drain(model, ask(), way)
    assert server.call_count == 0


# -- acomplete -------------------------------------------------------------------------


async def test_acomplete_sends_what_complete_sends_and_retries_the_same_way(server, model, sleeps):
    reply = completion(calls=[call("weather", '{"city":"Oslo"}')], finish="tool_calls")
    server.side_effect = [httpx.Response(503), ok(reply), ok(reply)]
    request = ask(tools=[weather.spec()])
    assert await model.acomplete(request) == model.complete(request)
    assert sent(server, 1) == sent(server, 2) and len(sleeps) == 1


async def test_acomplete_errors_are_the_same_model_errors(server, model):
    server.side_effect = [ok({"choices": [{"message": "hi"}]})]
    with pytest.raises(ModelError, match=r"choices\.0\.message"):
        await model.acomplete(ask())


async def test_acomplete_waits_with_anyio_by_default_and_closes_its_own_client(server):
    server.side_effect = [httpx.Response(429, headers={"retry-after": "0"}), ok(completion("x"))]
    async with OpenAICompatModel(BASE, "m") as m:
        assert (await m.acomplete(ask())).message.text == "x"
        client = m._async_http
    assert client is not None and client.is_closed


async def test_your_async_client_is_used_and_left_open(server):
    server.side_effect = [ok(completion("x"))]
    async with httpx.AsyncClient(headers={"X-Team": "b"}) as http:
        async with OpenAICompatModel(BASE, "m", async_http_client=http) as m:
            await m.acomplete(ask())
        assert not http.is_closed
    assert server.calls[0].request.headers["X-Team"] == "b"
