"""Replies from the server: usage, stop reasons, reasoning, and replies of the wrong shape."""

from __future__ import annotations

import json

import httpx
import pytest
from openai_fakes import (
    ask,
    call,
    completion,
    ok,
)

from agentloops import (
    ModelError,
    Usage,
)

# -- responses -------------------------------------------------------------------------


def test_usage_maps_cached_prompt_tokens_to_cache_reads(server, model):
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "total_tokens": 107,
        "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10},
    }
    server.side_effect = [ok(completion("x", usage=usage)), ok(completion("y", usage={}))]
    assert model.complete(ask()).usage == Usage(30, 7, 60, 10)
    assert model.complete(ask()).usage == Usage()


def test_usage_without_details_is_all_uncached(server, model):
    server.side_effect = [ok(completion("x", usage={"prompt_tokens": 12, "completion_tokens": 3}))]
    response = model.complete(ask())
    assert response.usage == Usage(input_tokens=12, output_tokens=3)
    assert response.model == "qwen3:8b"


@pytest.mark.parametrize(
    ("finish", "calls", "stop"),
    [
        ("stop", None, "end_turn"),
        ("stop", [call("now", "{}")], "tool_use"),  # older Ollama
        ("tool_calls", [call("now", "{}")], "tool_use"),
        ("length", None, "max_tokens"),
        ("content_filter", None, "refusal"),
        (None, None, "end_turn"),
        (None, [call("now", "{}")], "tool_use"),
    ],
)
def test_finish_reason_is_normalised(server, model, finish, calls, stop):
    server.side_effect = [ok(completion("text", calls=calls, finish=finish))]
    assert model.complete(ask()).stop_reason == stop


def test_an_unknown_finish_reason_is_a_model_error_not_an_answer(server, model):
    server.side_effect = [ok(completion("partial", finish="error"))]
    with pytest.raises(ModelError, match="unknown finish_reason 'error'"):
        model.complete(ask())


def test_a_refusal_is_the_answer_text_with_stop_reason_refusal(server, model):
    server.side_effect = [ok(completion(None, refusal="I can't help with that."))]
    response = model.complete(ask())
    assert (response.stop_reason, response.message.text) == ("refusal", "I can't help with that.")


def test_reasoning_is_kept_out_of_the_answer(server, model):
    server.side_effect = [
        ok(completion("Paris.", reasoning_content="The user asks... capital is Paris.")),
        ok(completion("Rome.", reasoning="thinking")),
        ok(completion("<think>\nlet me see\n</think>\n\nLima.")),
        ok(completion([{"type": "text", "text": "Oslo."}])),
    ]
    assert [model.complete(ask()).message.text for _ in range(4)] == [
        "Paris.",
        "Rome.",
        "Lima.",
        "Oslo.",
    ]


def test_an_empty_reply_has_no_blocks(server, model):
    server.side_effect = [ok(completion(None, finish="length"))]
    response = model.complete(ask())
    assert (response.message.content, response.stop_reason) == ((), "max_tokens")


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "upstream timeout"}},
        {"choices": []},
        {"object": "chat.completion", "x": "y" * 5000},
        ["not", "an", "object"],
    ],
)
def test_a_reply_without_choices_is_a_model_error_with_the_body(server, model, body):
    server.side_effect = [ok(body)]
    with pytest.raises(ModelError, match="no choices") as info:
        model.complete(ask())
    assert len(str(info.value)) < 600
    assert json.dumps(body)[:30] in str(info.value)


def test_a_reply_that_is_not_json_is_a_model_error(server, model):
    server.side_effect = [httpx.Response(200, text="<html>gateway</html>")]
    with pytest.raises(ModelError, match=r"not JSON.*gateway"):
        model.complete(ask())
