"""A ReAct run streamed end to end through each real provider client, over mocked HTTP
(respx; the anthropic SDK through httpcore2): deltas from the wire reach the consumer,
tool-call fragments split mid-JSON become one call that runs once, and both drivers agree.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import respx
from _anthropic_helpers import make_async_model, make_model, streamed, streamed_text, tool_use

from agentloops import (
    ModelError,
    OpenAICompatModel,
    ReActLoop,
    ReActResult,
    TextDelta,
    ToolCallDelta,
    tool,
)

RAN: list[dict[str, Any]] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append({"key": key})
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


def collect(loop: ReActLoop, way: str) -> list[Any]:
    if way == "stream":
        return list(loop.stream("What is alpha?"))

    async def drain() -> list[Any]:
        return [item async for item in loop.astream("What is alpha?")]

    return asyncio.run(drain())


def check(items: list[Any], answer: str) -> None:
    *events, result = items
    assert isinstance(result, ReActResult) and result.answer == answer
    assert RAN == [{"key": "alpha"}]  # one call, from the whole reply, never from fragments
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert fragments[0].name == "lookup"
    assert json.loads("".join(e.arguments for e in fragments)) == {"key": "alpha"}
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer
    assert {e.run_id for e in events} == {result.run_id}


# -- OpenAI-compatible: server-sent events over httpx ------------------------------------

BASE = "http://llm.test/v1"


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


def openai_sse(*chunks: str) -> httpx.Response:
    body = "".join(chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def openai_tool_turn() -> httpx.Response:
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup"}}
    return openai_sse(
        chunk({"tool_calls": [{**first, "function": {"name": "lookup", "arguments": '{"ke'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'y": "al'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'pha"}'}}]}, "tool_calls"),
    )


def openai_text_turn(answer: str) -> httpx.Response:
    return openai_sse(chunk({"content": answer[:5]}), chunk({"content": answer[5:]}, "stop"))


@pytest.mark.parametrize("way", ["stream", "astream"])
def test_a_react_run_streams_through_an_openai_compatible_server(way: str) -> None:
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(
            side_effect=[openai_tool_turn(), openai_text_turn("Alpha is A.")]
        )
        with OpenAICompatModel(BASE, "m") as model:
            check(collect(ReActLoop(model, [lookup]), way), "Alpha is A.")


def test_an_openai_stream_cut_off_mid_call_fails_the_run_and_runs_nothing() -> None:
    cut = "".join(
        [
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c", "function": {"name": "lookup", "arguments": '{"ke'}}
                    ]
                }
            )
        ]
    )
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=cut
            )
        )
        with OpenAICompatModel(BASE, "m", max_retries=0) as model, pytest.raises(ModelError):
            list(ReActLoop(model, [lookup]).stream("q"))
    assert RAN == []


# -- Claude through the anthropic SDK (httpx2, mocked on httpcore2) --------------------------


@pytest.mark.parametrize("way", ["stream", "astream"])
def test_a_react_run_streams_through_the_anthropic_sdk(
    messages_route: respx.Route, way: str
) -> None:
    messages_route.side_effect = [
        streamed(tool_use("toolu_1", "lookup", key="alpha"), stop_reason="tool_use"),
        streamed_text("Alpha is A."),
    ]
    model = make_model() if way == "stream" else make_async_model()
    check(collect(ReActLoop(model, [lookup]), way), "Alpha is A.")
