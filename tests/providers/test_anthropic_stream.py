"""AnthropicModel's async and streaming calls (`acomplete`, `stream`, `astream`) through the
real SDK, with respx on httpcore2 serving JSON replies and server-sent events built here.

Most tests run twice, `mode="sync"` (`complete`, `stream`) and `mode="async"`
(`acomplete`, `astream`, on the async client built from the sync one's settings).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anthropic
import httpx
import pytest
import respx
from _anthropic_helpers import (
    REDACTED,
    SIGNATURE,
    THINKING,
    Body,
    as_events,
    bodies,
    body_response,
    encode,
    error,
    make_model,
    reply,
    reply_body,
    sse,
    text,
    tool_use,
)
from conftest import ANTHROPIC_API

from agentloops import (
    AnthropicModel,
    ConfigurationError,
    Message,
    ModelCallFinished,
    ModelError,
    ModelRequest,
    ModelResponse,
    ReActLoop,
    RedactedThinking,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)

pytestmark = pytest.mark.anyio
MODES = pytest.mark.parametrize("mode", ["sync", "async"])
ARGS = {"query": 'rôme "centre"', "filters": {"year": [2023, 2024], "exact": True}}


def ask(content: str = "q") -> ModelRequest:
    return ModelRequest("", [Message.user(content)])


async def complete(model: AnthropicModel, request: ModelRequest, mode: str) -> ModelResponse:
    if mode == "sync":
        return model.complete(request)
    return await model.acomplete(request)


async def stream(model: AnthropicModel, request: ModelRequest, mode: str) -> list[Any]:
    if mode == "sync":
        return list(model.stream(request))
    return [item async for item in model.astream(request)]


async def stream_until_error(
    model: AnthropicModel, mode: str
) -> tuple[list[Any], pytest.ExceptionInfo[ModelError]]:
    """What a stream yielded before it raised, and the error."""
    items: list[Any] = []
    with pytest.raises(ModelError) as info:
        if mode == "sync":
            for item in model.stream(ask()):
                items.append(item)
        else:
            async for item in model.astream(ask()):
                items.append(item)
    return items, info


def calls_in(items: list[Any]) -> dict[int, list[ToolCallDelta]]:
    calls: dict[int, list[ToolCallDelta]] = {}
    for item in items:
        if isinstance(item, ToolCallDelta):
            calls.setdefault(item.index, []).append(item)
    return calls


FULL = reply_body(
    THINKING,
    REDACTED,
    text("Checking two sources."),
    tool_use("toolu_a", **ARGS),
    tool_use("toolu_b", "explode", reason="why not"),
    stop_reason="tool_use",
    usage={
        "input_tokens": 12,
        "output_tokens": 80,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 40,
    },
)


@MODES
async def test_stream_yields_deltas_then_the_response_complete_returns(
    messages_route: respx.Route, mode: str
) -> None:
    messages_route.side_effect = [
        httpx.Response(200, json=FULL),
        sse(*as_events(FULL, size=5)),
    ]
    model = make_model()
    expected = await complete(model, ask(), mode)
    items = await stream(model, ask(), mode)

    assert items[-1] == expected
    assert not any(isinstance(i, ModelResponse) for i in items[:-1])
    assert expected.message.content == (
        Thinking(THINKING["thinking"], SIGNATURE),
        RedactedThinking(REDACTED["data"]),
        Text("Checking two sources."),
        ToolCall("toolu_a", "lookup", ARGS),
        ToolCall("toolu_b", "explode", {"reason": "why not"}),
    )
    assert expected.usage == Usage(
        input_tokens=12, output_tokens=80, cache_read_tokens=300, cache_write_tokens=40
    )
    assert expected.stop_reason == "tool_use"
    thought = "".join(i.text for i in items if isinstance(i, ThinkingDelta))
    assert thought == THINKING["thinking"]
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "Checking two sources."
    assert [e.get("stream", False) for e in bodies(messages_route)] == [False, True]
    assert all(i.loop == "" and i.run_id == "" for i in items[:-1])


@MODES
async def test_tool_call_deltas_carry_id_and_name_first_then_fragments_split_mid_json(
    messages_route: respx.Route, mode: str
) -> None:
    messages_route.mock(return_value=sse(*as_events(FULL, size=4)))
    items = await stream(make_model(), ask(), mode)
    calls = calls_in(items)
    assert sorted(calls) == [0, 1]  # positions among the reply's tool calls, not block indexes
    for index, (call_id, name, args) in enumerate(
        [("toolu_a", "lookup", ARGS), ("toolu_b", "explode", {"reason": "why not"})]
    ):
        first, *rest = calls[index]
        assert (first.call_id, first.name, first.arguments) == (call_id, name, "")
        assert all(d.call_id == "" and d.name == "" for d in rest)
        fragments = [d.arguments for d in rest]
        assert json.loads("".join(fragments)) == args
        assert len(fragments) > 2
    unparsable = 0
    for fragment in (d.arguments for d in calls[0][1:]):
        try:
            json.loads(fragment)
        except ValueError:
            unparsable += 1
    assert unparsable > 0  # the fragments really are cut mid-JSON


@MODES
async def test_streamed_thinking_keeps_its_signature_and_is_echoed_byte_for_byte(
    messages_route: respx.Route, mode: str
) -> None:
    first = reply_body(THINKING, tool_use("toolu_1", query="x"), stop_reason="tool_use")
    messages_route.side_effect = [
        sse(*as_events(first, size=3)),
        sse(*as_events(reply_body(text("done")))),
    ]
    model = make_model()
    transcript = [Message.user("q")]
    response = (await stream(model, ModelRequest("", transcript), mode))[-1]
    assert response.message.content[0] == Thinking(THINKING["thinking"], SIGNATURE)
    transcript += [response.message, Message("user", (ToolResult("toolu_1", "found x"),))]
    await stream(model, ModelRequest("", transcript), mode)
    echoed = bodies(messages_route)[1]["messages"][1]["content"]
    assert echoed[0] == THINKING


@MODES
async def test_pings_and_unknown_events_are_ignored(messages_route: respx.Route, mode: str) -> None:
    events = as_events(reply_body(text("hello")))
    events.insert(1, {"type": "ping"})
    events.insert(3, {"type": "some_future_event", "detail": {"x": 1}})
    content_delta = {"type": "content_block_delta", "index": 0}
    events.insert(4, {**content_delta, "delta": {"type": "future_delta", "x": 1}})
    messages_route.mock(return_value=sse(*events))
    items = await stream(make_model(), ask(), mode)
    assert items[-1].message.text == "hello"


@MODES
async def test_a_message_delta_without_usage_keeps_the_reply_and_says_so(
    messages_route: respx.Route, mode: str
) -> None:
    events = as_events(reply_body(text("hello"), usage={"input_tokens": 12, "output_tokens": 3}))
    [delta] = [e for e in events if e["type"] == "message_delta"]
    del delta["usage"]  # a gateway that leaves it out
    messages_route.mock(return_value=sse(*events))
    final = (await stream(make_model(), ask(), mode))[-1]
    assert final.message.text == "hello" and final.stop_reason == "end_turn"
    assert not final.usage_reported
    assert final.usage == Usage(input_tokens=12, output_tokens=1)  # message_start's counts

    messages_route.mock(return_value=sse(*events))
    items = list(ReActLoop(make_model(), []).stream("q"))  # the caller sees it in the event
    assert items[-1].answer == "hello"
    [finished] = [e for e in items if isinstance(e, ModelCallFinished)]
    assert finished.usage_reported is False


async def test_a_message_delta_with_usage_is_reported(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=sse(*as_events(reply_body(text("hello")))))
    final = [item async for item in make_model().astream(ask())][-1]
    assert final.usage_reported and final.usage.output_tokens == 5


@MODES
@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda events: events[:-1], id="before-message_stop"),
        pytest.param(lambda events: events[:8], id="mid-tool-json"),
        pytest.param(lambda events: events[:1], id="after-message_start"),
        pytest.param(lambda events: [], id="empty-body"),
    ],
)
async def test_a_stream_cut_off_raises_and_never_yields_a_response(
    messages_route: respx.Route, mode: str, cut: Any
) -> None:
    body = reply_body(text("Let me look."), tool_use("toolu_1", **ARGS), stop_reason="tool_use")
    events = cut(as_events(body, size=6))
    messages_route.mock(return_value=sse(*events))
    items, info = await stream_until_error(make_model(), mode)
    assert "ended before message_stop" in str(info.value)
    assert not any(isinstance(i, ModelResponse) for i in items)


@MODES
async def test_a_cut_off_stream_never_becomes_a_complete_response(
    messages_route: respx.Route, mode: str
) -> None:
    """`complete` streams above the SDK's limit: a cut there is an error too, not a reply."""
    body = reply_body(tool_use("toolu_1", **ARGS), stop_reason="tool_use")
    messages_route.mock(return_value=sse(*as_events(body)[:6]))
    with pytest.raises(ModelError, match="ended before message_stop"):
        await complete(make_model(max_tokens=64000), ask(), mode)


@MODES
async def test_an_overloaded_error_event_mid_stream_is_a_model_error(
    messages_route: respx.Route, mode: str
) -> None:
    events = as_events(reply_body(text("The answer is forty-two.")), size=6)[:4]
    failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    messages_route.mock(return_value=sse(*events, failure))
    items, info = await stream_until_error(make_model(), mode)
    assert "overloaded_error: Overloaded" in str(info.value)
    assert info.value.request_id == "req_sse"
    assert [i.text for i in items] == ["The an", "swer i"]  # what came before the error


@MODES
async def test_closing_the_stream_early_closes_the_http_stream(
    messages_route: respx.Route, mode: str
) -> None:
    events = as_events(reply_body(text("a long answer " * 20)), size=5)
    body = Body([encode(e) for e in events])
    messages_route.mock(return_value=body_response(body))
    model = make_model()
    if mode == "sync":
        iterator = model.stream(ask())
        assert isinstance(next(iterator), TextDelta)
        iterator.close()
    else:
        aiterator = model.astream(ask())
        assert isinstance(await aiterator.__anext__(), TextDelta)
        await aiterator.aclose()  # type: ignore[attr-defined]
    assert body.closed
    assert body.sent < len(events)


async def test_cancelling_acomplete_cancels_the_http_call() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    attempts: list[httpx.Request] = []

    async def never_answers(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    # respx counts a call when it is answered, so this route is never "called"
    with respx.mock(using="httpcore2", base_url=ANTHROPIC_API, assert_all_called=False) as api:
        api.post("/v1/messages").mock(side_effect=never_answers)
        task = asyncio.create_task(make_model().acomplete(ask()))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert cancelled.is_set()
    assert len(attempts) == 1  # cancelled, not retried


async def test_cancelling_astream_mid_stream_closes_the_http_stream(
    messages_route: respx.Route,
) -> None:
    events = as_events(reply_body(text("a long answer")), size=4)
    body = Body([encode(e) for e in events[:4]], then="hang")
    messages_route.mock(return_value=body_response(body))
    first = asyncio.Event()
    seen: list[Any] = []

    async def consume() -> None:
        async for item in make_model().astream(ask()):
            seen.append(item)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert body.closed
    assert [item.text for item in seen] == ["a lo", "ng a"]  # all that came before the stall


@MODES
async def test_pause_turn_is_continued_while_streaming(
    messages_route: respx.Route, mode: str
) -> None:
    paused = reply_body(text("Part one."), tool_use("toolu_a", query="a"), stop_reason="pause_turn")
    finished = reply_body(
        tool_use("toolu_b", query="b"),
        stop_reason="tool_use",
        usage={"input_tokens": 4, "output_tokens": 3},
    )
    messages_route.side_effect = [
        httpx.Response(200, json=paused),
        httpx.Response(200, json=finished),
        sse(*as_events(paused)),
        sse(*as_events(finished)),
    ]
    model = make_model(cache=False)
    expected = await complete(model, ask(), mode)
    items = await stream(model, ask(), mode)
    assert items[-1] == expected
    assert expected.message.tool_calls == [
        ToolCall("toolu_a", "lookup", {"query": "a"}),
        ToolCall("toolu_b", "lookup", {"query": "b"}),
    ]
    assert expected.usage == Usage(input_tokens=14, output_tokens=8)
    calls = calls_in(items)
    assert [calls[0][0].call_id, calls[1][0].call_id] == ["toolu_a", "toolu_b"]
    sent = bodies(messages_route)
    assert sent[3]["messages"] == sent[1]["messages"]  # the same continuation, streamed
    assert sent[3]["messages"][-1] == {"role": "assistant", "content": paused["content"]}


@MODES
async def test_a_paused_turn_streamed_goes_back_exactly_as_a_plain_one(
    messages_route: respx.Route, mode: str
) -> None:
    """Blocks agentloops does not use (server tools, citations) still go back whole."""
    citation = {"type": "web_search_result_location", "url": "https://x.test", "cited_text": "c"}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    paused = reply_body(
        {**text("Searching."), "citations": [citation, citation]},
        {**search, "input": {"query": "rome", "max": 3}},
        found,
        stop_reason="pause_turn",
    )
    messages_route.side_effect = [
        httpx.Response(200, json=paused),
        reply(text("done")),
        sse(*as_events(paused, size=4)),
        sse(*as_events(reply_body(text("done")))),
    ]
    model = make_model(cache=False)
    expected = await complete(model, ask(), mode)
    items = await stream(model, ask(), mode)
    assert items[-1] == expected
    assert expected.message.content == (Text("Searching."), Text("done"))
    assert not calls_in(items)  # a server tool's call is not ours to run
    sent = bodies(messages_route)
    assert sent[1]["messages"][-1] == {"role": "assistant", "content": paused["content"]}
    assert sent[3]["messages"] == sent[1]["messages"]


@MODES
async def test_a_request_the_api_would_reject_fails_when_stream_is_called(mode: str) -> None:
    request = ModelRequest("", [Message.user("q")], tool_choice="any")
    model = make_model()
    with pytest.raises(ConfigurationError, match="no tools were offered"):
        model.stream(request) if mode == "sync" else model.astream(request)


async def test_acomplete_streams_under_the_hood_above_the_sdk_limit(
    messages_route: respx.Route,
) -> None:
    messages_route.mock(return_value=sse(*as_events(FULL)))
    response = await make_model(max_tokens=64000).acomplete(ask())
    assert bodies(messages_route)[0]["stream"] is True
    assert response.message.tool_calls[0] == ToolCall("toolu_a", "lookup", ARGS)


async def test_acomplete_gets_the_sdks_retries_and_errors(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        error(529, "overloaded_error", "Overloaded"),
        reply(text("ok")),
        error(400, "invalid_request_error", "bad thing", "req_400"),
    ]
    model = make_model()
    assert (await model.acomplete(ask())).message.text == "ok"
    with pytest.raises(ModelError, match="400") as info:
        await model.acomplete(ask())
    assert (info.value.status, info.value.request_id) == (400, "req_400")
    assert isinstance(info.value.__cause__, anthropic.BadRequestError)
    assert messages_route.call_count == 3


@pytest.mark.parametrize("kind", ["api_key", "auth_token"])
async def test_the_async_client_is_built_from_the_sync_clients_settings(
    messages_route: respx.Route, kind: str
) -> None:
    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded")] * 2
    credential = {kind: "sk-ant-sync-0123"}
    client = anthropic.Anthropic(**credential, max_retries=1, timeout=12.5)  # type: ignore[arg-type]
    model = AnthropicModel(client=client)
    with pytest.raises(ModelError):
        await model.acomplete(ask())
    assert messages_route.call_count == 2  # max_retries=1 carried over
    sent = messages_route.calls[0].request.headers["authorization"]
    assert sent == "Bearer sk-ant-sync-0123"
    assert model.async_client.timeout == 12.5
    assert model.async_client is model.async_client  # built once


async def test_a_given_async_client_is_used_and_the_sync_one_built_from_it(
    messages_route: respx.Route,
) -> None:
    messages_route.side_effect = [reply(text("a")), reply(text("s"))]
    async_client = anthropic.AsyncAnthropic(api_key="sk-ant-async-4567", max_retries=0)
    model = AnthropicModel(async_client=async_client)
    assert model.async_client is async_client
    assert (await model.acomplete(ask())).message.text == "a"
    assert model.complete(ask()).message.text == "s"
    keys = [c.request.headers["authorization"] for c in messages_route.calls]
    assert keys == ["Bearer sk-ant-async-4567"] * 2
    assert model.client.max_retries == 0


async def test_concurrent_async_calls_on_one_model_keep_their_own_transcripts(
    messages_route: respx.Route,
) -> None:
    """Each asyncio task keeps its own converted transcript, so interleaved runs never mix."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)["messages"]
        task = sent[0]["content"][0]["text"]
        turn = len(sent) // 2 + 1
        assert sent == wire_of(task, turn)
        if turn < 4:
            call = tool_use(f"toolu_{task}_{turn}", query=f"{task}.{turn}")
            return reply(call, stop_reason="tool_use")
        return reply(text(f"done {task}"))

    messages_route.side_effect = answer
    model = make_model(cache=False)

    async def run(task: str) -> str:
        transcript = [Message.user(task)]
        while True:
            response = await model.acomplete(ModelRequest("", transcript))
            transcript.append(response.message)
            if not response.message.tool_calls:
                return response.message.text
            call = response.message.tool_calls[0]
            result = ToolResult(call.id, f"found {call.args['query']}")
            transcript.append(Message("user", (result,)))
            await asyncio.sleep(0)  # let the other runs interleave

    tasks = [f"task{i}" for i in range(6)]
    answers = await asyncio.gather(*(run(t) for t in tasks))
    assert answers == [f"done {t}" for t in tasks]
    assert messages_route.call_count == 24


def wire_of(task: str, turn: int) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "user", "content": [text(task)]}]
    for n in range(1, turn):
        call_id = f"toolu_{task}_{n}"
        wire.append({"role": "assistant", "content": [tool_use(call_id, query=f"{task}.{n}")]})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": f"found {task}.{n}"}
        wire.append({"role": "user", "content": [result]})
    return wire
