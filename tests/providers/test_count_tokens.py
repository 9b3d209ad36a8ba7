"""Token counts before the call: Anthropic's count-tokens endpoint, the OpenAI-compatible
servers' tokenizers (remembered when absent), and the estimate behind them."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest
import respx

from agentloops import AnthropicModel, Message, ModelRequest, OpenAICompatModel
from agentloops.messages import ToolCall, ToolResult
from agentloops.model import (
    ToolSpec,
    acount_tokens,
    count_tokens,
    estimate_message_tokens,
    estimate_tokens,
)
from agentloops.testing import ScriptedModel

ROOT = "http://llm.test"
BASE = f"{ROOT}/v1"
TOOL = ToolSpec("lookup", "Look up a word.", {"type": "object", "properties": {}})
REQUEST = ModelRequest(
    "Be brief.",
    [
        Message.user("define cat"),
        Message("assistant", (ToolCall("c1", "lookup", {"w": "cat"}),)),
        Message("user", (ToolResult("c1", "a small feline"),)),
    ],
    tools=[TOOL],
)


def test_the_estimate_counts_every_message_and_the_tools_and_errs_high() -> None:
    bare = ModelRequest("", [Message.user("x" * 400)])
    assert estimate_tokens(bare) >= 100  # 400 characters at 4 a token, and a margin
    assert estimate_tokens(REQUEST) > estimate_tokens(ModelRequest("Be brief.", REQUEST.messages))
    longer = ModelRequest("Be brief.", [*REQUEST.messages, Message.assistant("done")])
    assert estimate_tokens(longer) == estimate_tokens(
        ModelRequest("Be brief.", REQUEST.messages)
    ) + estimate_message_tokens(Message.assistant("done"))


def test_count_tokens_falls_back_to_the_estimate_for_a_client_without_a_count() -> None:
    assert count_tokens(ScriptedModel([]), REQUEST) == estimate_tokens(REQUEST)


@pytest.mark.anyio
async def test_acount_tokens_prefers_the_clients_async_count() -> None:
    class Counting:
        async def acount_tokens(self, request: ModelRequest) -> int:
            return 42

    assert await acount_tokens(Counting(), REQUEST) == 42
    assert await acount_tokens(ScriptedModel([]), REQUEST) == estimate_tokens(REQUEST)


def test_anthropic_asks_the_count_tokens_endpoint(anthropic_api: respx.MockRouter) -> None:
    route = anthropic_api.post("/v1/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 123})
    )
    model = AnthropicModel("claude-sonnet-5", client=anthropic.Anthropic(api_key="test-key"))
    assert model.count_tokens(REQUEST) == 123
    sent = json.loads(route.calls[0].request.content)
    assert "max_tokens" not in sent
    assert sent["model"] == "claude-sonnet-5" and sent["tools"][0]["name"] == "lookup"
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert count_tokens(model, REQUEST) == 123


@pytest.mark.anyio
async def test_anthropic_async_count(anthropic_api: respx.MockRouter) -> None:
    anthropic_api.post("/v1/messages/count_tokens").mock(
        return_value=httpx.Response(200, json={"input_tokens": 77})
    )
    model = AnthropicModel("claude-sonnet-5", client=anthropic.Anthropic(api_key="test-key"))
    assert await model.acount_tokens(REQUEST) == 77


def test_vllm_counts_the_chat_messages_exactly() -> None:
    with respx.mock(base_url=ROOT) as router:
        route = router.post("/tokenize").mock(
            return_value=httpx.Response(
                200, json={"count": 57, "max_model_len": 8192, "tokens": [1] * 57}
            )
        )
        model = OpenAICompatModel(BASE, "m")
        assert model.count_tokens(REQUEST) == 57
        sent = json.loads(route.calls[0].request.content)
    assert sent["model"] == "m" and sent["messages"][0] == {
        "role": "system",
        "content": "Be brief.",
    }
    assert sent["tools"][0]["function"]["name"] == "lookup"


def test_llama_server_tokenizes_the_rendered_text_plus_the_templates_overhead() -> None:
    with respx.mock(base_url=ROOT) as router:
        route = router.post("/tokenize").mock(
            return_value=httpx.Response(200, json={"tokens": [1] * 30})
        )
        model = OpenAICompatModel(BASE, "m")
        counted = model.count_tokens(REQUEST)
        sent = json.loads(route.calls[0].request.content)
    assert "define cat" in sent["content"] and "lookup" in sent["content"]
    assert counted == 30 + 4 * 4 + 8  # four wire messages (system first), one tool


def test_llama_cpp_python_is_asked_after_a_404_and_then_straight_away() -> None:
    with respx.mock(base_url=ROOT) as router:
        missing = router.post("/tokenize").mock(return_value=httpx.Response(404))
        extras = router.post("/extras/tokenize/count").mock(
            return_value=httpx.Response(200, json={"count": 40})
        )
        model = OpenAICompatModel(BASE, "m")
        assert model.count_tokens(REQUEST) == 40 + 4 * 4 + 8
        assert model.count_tokens(REQUEST) == 40 + 4 * 4 + 8
    assert (missing.call_count, extras.call_count) == (1, 2)
    assert "define cat" in json.loads(extras.calls[0].request.content)["input"]


@pytest.mark.anyio
async def test_a_server_without_a_tokenizer_is_asked_once_then_estimated() -> None:
    with respx.mock(base_url=ROOT) as router:
        first = router.post("/tokenize").mock(return_value=httpx.Response(404))
        second = router.post("/extras/tokenize/count").mock(return_value=httpx.Response(404))
        model = OpenAICompatModel(BASE, "m")
        assert model.count_tokens(REQUEST) == estimate_tokens(REQUEST)
        assert model.count_tokens(REQUEST) == estimate_tokens(REQUEST)
        assert await model.acount_tokens(REQUEST) == estimate_tokens(REQUEST)
        await model.aclose()
    assert (first.call_count, second.call_count) == (1, 1)


def test_a_tokenizer_that_fails_once_is_estimated_that_time_and_asked_again() -> None:
    with respx.mock(base_url=ROOT) as router:
        route = router.post("/tokenize").mock(
            side_effect=[
                httpx.Response(500, json={"error": "busy"}),
                httpx.Response(200, json={"tokens": [1] * 10}),
            ]
        )
        model = OpenAICompatModel(BASE, "m")
        assert model.count_tokens(REQUEST) == estimate_tokens(REQUEST)
        assert model.count_tokens(REQUEST) == 10 + 4 * 4 + 8
    assert route.call_count == 2


@pytest.mark.anyio
async def test_the_async_count_reads_the_same_endpoints() -> None:
    with respx.mock(base_url=ROOT) as router:
        router.post("/tokenize").mock(
            return_value=httpx.Response(200, json={"count": 9, "max_model_len": 4096})
        )
        model = OpenAICompatModel(BASE, "m")
        assert await model.acount_tokens(REQUEST) == 9
        await model.aclose()
