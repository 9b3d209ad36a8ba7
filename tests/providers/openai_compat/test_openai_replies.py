"""Replies from the server: usage, stop reasons, reasoning, and replies of the wrong shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from _openai_fakes import ask, call, completion, ok, weather, weather_calls

from agentloops import ModelError, ReActLoop, Usage

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


# -- replies of the wrong shape: a ModelError naming the field, never a raw exception -----


def _reply(**choice: Any) -> dict[str, Any]:
    return {"model": "m", "choices": [{"finish_reason": "stop", **choice}]}


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (_reply(message="hello"), "choices.0.message: Input should be a valid dictionary"),
        (_reply(message={"tool_calls": "weather"}), "choices.0.message.tool_calls"),
        (_reply(message={"tool_calls": [{"id": "c"}]}), "choices.0.message.tool_calls.0.function"),
        (_reply(message={"tool_calls": ["c"]}), "choices.0.message.tool_calls.0"),
        (
            _reply(message={"tool_calls": [{"function": {"name": 7, "arguments": "{}"}}]}),
            "choices.0.message.tool_calls.0.function.name",
        ),
        (
            _reply(message={"content": [{"type": "text", "text": None}]}),
            "choices.0.message.content",
        ),
        (_reply(message={"content": 42}), "choices.0.message.content"),
        (_reply(message={"content": "x"}, finish_reason=3), "choices.0.finish_reason"),
        (_reply(), "choices.0.message: Field required"),
        (
            {**completion("x"), "usage": {"prompt_tokens": "many"}},
            "usage.prompt_tokens: Input should be a valid integer",
        ),
        ({**completion("x"), "usage": {"completion_tokens": -3}}, "usage.completion_tokens"),
        ({**completion("x"), "usage": "lots"}, "usage: Input should be a valid dictionary"),
        (
            {**completion("x"), "usage": {"prompt_tokens_details": {"cached_tokens": []}}},
            "usage.prompt_tokens_details.cached_tokens",
        ),
        ({"choices": "abc"}, "choices: Input should be a valid list"),
        ({"choices": [None]}, "choices.0: Input should be a valid dictionary"),
        ({**completion("x"), "model": ["m"]}, "model: Input should be a valid string"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_a_model_error_naming_the_field(server, model, body, names):
    server.side_effect = [ok(body)]
    with pytest.raises(ModelError, match="unexpected shape") as info:
        model.complete(ask())
    assert names in str(info.value)
    assert info.value.__cause__ is None  # the pydantic error is summarised, not chained


def test_a_wrongly_shaped_reply_inside_a_loop_carries_the_partial_run(server, model):
    server.side_effect = [
        ok(completion(calls=[call("weather", '{"city": "Oslo"}')], finish="tool_calls")),
        ok(_reply(message={"tool_calls": "weather"})),
    ]
    with pytest.raises(ModelError, match="tool_calls") as info:
        ReActLoop(model, [weather]).run("Oslo?")
    assert weather_calls == ["Oslo"]
    assert info.value.result is not None and info.value.result.tool_calls == 1


def test_parts_of_other_types_and_null_counts_are_fine(server, model):
    parts = [{"type": "text", "text": "Os"}, {"type": "image_url"}, {"type": "text", "text": "lo"}]
    usage = {"prompt_tokens": None, "completion_tokens": 2, "prompt_tokens_details": None}
    server.side_effect = [ok(completion(parts, usage=usage))]
    response = model.complete(ask())
    assert (response.message.text, response.usage) == ("Oslo", Usage(output_tokens=2))
