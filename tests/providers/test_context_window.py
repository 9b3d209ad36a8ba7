"""`ContextWindowExceeded`: both providers recognise the servers' own "prompt too long"
answers (the bodies below are the servers' real wording), carry the numbers they give,
never retry them, and a run that hits one keeps its partial result."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest
import respx
from _anthropic_helpers import error

from agentloops import (
    AnthropicModel,
    ContextWindowExceeded,
    FallbackModel,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatModel,
    ReActLoop,
    tool,
)
from agentloops.providers import _window as window
from agentloops.testing import ScriptedModel, use_tools

BASE = "http://llm.test/v1"
REQUEST = ModelRequest("", [Message.user("q")])

LLAMA_CPP_PYTHON = {  # llama-cpp-python's server (the `make realmodel` server)
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, you requested "
        "8204 tokens (7180 in the messages, 1024 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
LLAMA_SERVER = {  # llama.cpp's llama-server
    "error": {
        "code": 400,
        "message": "request (4476 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
VLLM = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested "
    "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of "
    "the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
OPENAI = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130532 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OLLAMA = {  # Ollama passes its runner's (llama-server's) error on, quoted as a string
    "error": {
        "message": json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (351 tokens) exceeds the available context size "
                    "(256 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 351,
                    "n_ctx": 256,
                }
            }
        ),
        "type": "api_error",
        "param": None,
        "code": None,
    }
}
LLAMA_CPP_RAW = {"error": {"message": "Requested tokens (9437) exceed context window of 8192"}}

SERVERS = [
    pytest.param(400, LLAMA_CPP_PYTHON, 8204, 8192, id="llama-cpp-python"),
    pytest.param(400, LLAMA_SERVER, 4476, 4096, id="llama-server"),
    pytest.param(400, VLLM, 5000, 4096, id="vllm"),
    pytest.param(400, OPENAI, 130532, 128000, id="openai"),
    pytest.param(400, OLLAMA, 351, 256, id="ollama"),
    pytest.param(500, LLAMA_CPP_RAW, 9437, 8192, id="llama-cpp-python-500"),
]


@pytest.mark.parametrize(("status", "body", "tokens", "limit"), SERVERS)
def test_openai_compat_recognises_each_servers_answer_with_its_numbers(
    status: int, body: dict[str, object], tokens: int, limit: int
) -> None:
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(status, json=body)
        )
        model = OpenAICompatModel(BASE, "m", sleep=lambda s: pytest.fail("retried"))
        with pytest.raises(ContextWindowExceeded) as info:
            model.complete(REQUEST)
    assert route.call_count == 1  # never retried, even the 500
    assert (info.value.tokens, info.value.limit) == (tokens, limit)
    assert info.value.kind == "context_window" and info.value.status == status


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_openai_compat_async_and_streamed_calls_raise_it_too(streamed: bool) -> None:
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(400, json=LLAMA_CPP_PYTHON)
        )
        model = OpenAICompatModel(BASE, "m")
        with pytest.raises(ContextWindowExceeded) as info:
            if streamed:
                async for _ in model.astream(REQUEST):
                    pass
            else:
                await model.acomplete(REQUEST)
        await model.aclose()
    assert route.call_count == 1
    assert (info.value.tokens, info.value.limit) == (8204, 8192)


def test_anthropic_carries_the_numbers_and_does_not_retry(messages_route: respx.Route) -> None:
    messages_route.mock(
        return_value=error(
            400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
        )
    )
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key", max_retries=3))
    with pytest.raises(ContextWindowExceeded) as info:
        model.complete(REQUEST)
    assert messages_route.call_count == 1
    assert (info.value.tokens, info.value.limit) == (210000, 200000)


def test_anthropic_stream_raises_it_too(messages_route: respx.Route) -> None:
    messages_route.mock(
        return_value=error(
            400, "invalid_request_error", "prompt is too long: 9000 tokens > 8192 maximum"
        )
    )
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key"))
    with pytest.raises(ContextWindowExceeded) as info:
        list(model.stream(REQUEST))
    assert (info.value.tokens, info.value.limit) == (9000, 8192)


def test_an_ordinary_bad_request_is_not_a_full_window() -> None:
    assert not window.too_long('{"error": {"message": "messages: field required"}}')
    assert window.numbers("a 400 without numbers") == (None, None)


def test_a_run_that_hits_a_full_window_keeps_its_partial_result() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "x" * 100

    full = ContextWindowExceeded("prompt is too long", status=400, tokens=9000, limit=8192)
    model = ScriptedModel([use_tools(("lookup", {"q": "a"})), full])
    with pytest.raises(ContextWindowExceeded) as info:
        ReActLoop(model, [lookup]).run("task")
    result = info.value.result
    assert result is not None and result.model_calls == 1
    assert [m.role for m in result.messages] == ["user", "assistant", "user"]


def test_fallback_moves_to_a_larger_window_and_keeps_the_type_when_all_are_too_small() -> None:
    small = ContextWindowExceeded("small", status=400, tokens=9000, limit=8192)
    larger = ScriptedModel(["fits"])
    assert FallbackModel([ScriptedModel([small]), larger]).complete(REQUEST).message.text == "fits"
    also = ContextWindowExceeded("also", status=400, tokens=9000, limit=8500)
    with pytest.raises(ContextWindowExceeded) as info:
        FallbackModel([ScriptedModel([small]), ScriptedModel([also])]).complete(REQUEST)
    assert (info.value.tokens, info.value.limit) == (9000, 8500)
    assert len(info.value.failures) == 2
    assert isinstance(info.value, ModelError)
