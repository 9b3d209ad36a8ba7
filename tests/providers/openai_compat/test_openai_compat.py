"""OpenAICompatModel against a respx-mocked server: the tool loop, secrets, settings, pickling."""

from __future__ import annotations

import json
import pickle
import traceback
from typing import Any

import httpx
import pytest
from _openai_fakes import (
    BASE,
    KEY,
    ask,
    call,
    completion,
    now,
    ok,
    sent,
    weather,
    weather_calls,
)

from agentloops import (
    ConfigurationError,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatModel,
    ReActLoop,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    event_to_dict,
)

# -- the tool loop ---------------------------------------------------------------------


def test_two_turn_tool_loop_echoes_the_assistant_turn_and_answers_each_call(server, model):
    raw = '{"city":"Paris"}'  # compact, as the model wrote it: echoed byte for byte
    server.side_effect = [
        ok(completion(calls=[call("weather", raw)], finish="tool_calls")),
        ok(completion("It is 18C in Paris.")),
    ]
    result = ReActLoop(model, [weather], system="Be brief.").run("Weather in Paris?")

    assert result.answer == "It is 18C in Paris."
    assert weather_calls == ["Paris"]
    first, second = sent(server, 0), sent(server, 1)
    assert first["tools"][0]["function"]["name"] == "weather"
    assert first["tool_choice"] == "auto"
    assert first["stream"] is False
    assert second["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",  # not null: llama-cpp-python's server refuses null and a missing key
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": raw},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C in Paris"},
    ]


def test_parallel_calls_get_one_tool_message_each_in_the_order_asked(server, model):
    calls = [
        call("weather", json.dumps({"city": c}), f"call_{c}") for c in ("Oslo", "Rome", "Lima")
    ]
    server.side_effect = [ok(completion(calls=calls, finish="tool_calls")), ok(completion("Done."))]
    result = ReActLoop(model, [weather]).run("Three cities")

    assert result.answer == "Done."
    assert sorted(weather_calls) == ["Lima", "Oslo", "Rome"]
    tool_messages = [m for m in sent(server)["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_Oslo", "18C in Oslo"),
        ("call_Rome", "18C in Rome"),
        ("call_Lima", "18C in Lima"),
    ]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"city": "Paris"', "not valid JSON"),
        ("{'city': 'Paris'}", "not valid JSON"),
        ('["Paris"]', "must be a JSON object, got list"),
        ("42", "must be a JSON object, got int"),
        (["Paris"], "must be a JSON object"),
        ("{" + "x" * 100_000, "not valid JSON"),
    ],
)
def test_unusable_arguments_are_an_error_the_model_sees_and_the_run_goes_on(
    server, model, arguments, says
):
    server.side_effect = [
        ok(completion(calls=[call("weather", arguments)], finish="tool_calls")),
        ok(completion(calls=[call("weather", '{"city": "Paris"}', "call_2")], finish="tool_calls")),
        ok(completion("18C.")),
    ]
    result = ReActLoop(model, [weather]).run("Weather in Paris?")

    assert result.answer == "18C."
    assert weather_calls == ["Paris"]  # the broken call never ran; the corrected one did
    second = sent(server, 1)["messages"]
    assert second[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert second[-1]["role"] == "tool"
    assert says in second[-1]["content"]
    assert second[-1]["content"].startswith("Error: invalid arguments for 'weather'")
    assert len(second[-1]["content"]) < 600  # huge arguments are quoted cut, with a marker
    assert result.messages[2].tool_results[0].is_error


@pytest.mark.parametrize("arguments", ["", "  ", None])
def test_empty_arguments_mean_no_arguments(server, model, arguments):
    server.side_effect = [
        ok(completion(calls=[call("now", arguments)], finish="tool_calls")),
        ok(completion("Noon.")),
    ]
    result = ReActLoop(model, [now]).run("Time?")
    assert result.answer == "Noon."
    assert result.messages[1].tool_calls[0].args == {}
    assert result.messages[2].tool_results[0] == ToolResult("call_1", "12:00", False)


@pytest.mark.parametrize(
    "arguments",
    [{"city": "Oslo"}, json.dumps(json.dumps({"city": "Oslo"})), '{"city": "Oslo\n"}'],
)
def test_arguments_as_an_object_encoded_twice_or_with_a_raw_newline_are_accepted(
    server, model, arguments
):
    server.side_effect = [ok(completion(calls=[call("weather", arguments)])), ok(completion("ok"))]
    ReActLoop(model, [weather]).run("Oslo?")
    assert [c.strip() for c in weather_calls] == ["Oslo"]  # a raw newline in a string is fine


def test_missing_and_repeated_call_ids_are_made_unique(server, model):
    server.side_effect = [
        ok(
            completion(
                calls=[
                    call("weather", '{"city": "Oslo"}', "call_0"),
                    call("weather", '{"city": "Rome"}', "call_0"),
                    call("weather", '{"city": "Lima"}', None),
                ],
                finish="tool_calls",
            )
        ),
        # llama.cpp numbers calls per turn, so the next turn reuses "call_0"
        ok(completion(calls=[call("weather", '{"city": "Kyiv"}', "call_0")])),
        ok(completion("Done.")),
    ]
    result = ReActLoop(model, [weather]).run("Cities")

    assert result.answer == "Done."
    assert sorted(weather_calls) == ["Kyiv", "Lima", "Oslo", "Rome"]
    ids = [c.id for m in result.messages for c in m.tool_calls]
    assert len(set(ids)) == 4
    assert ids[:2] == ["call_0", "call_0_d1"]
    answered = [m["tool_call_id"] for m in sent(server)["messages"] if m["role"] == "tool"]
    assert answered == ids


def test_text_after_results_is_its_own_user_message_and_thinking_is_left_out(server, model):
    server.side_effect = [ok(completion("ok"))]
    messages = [
        Message.user("go"),
        Message("assistant", (Thinking("hmm", "sig"), Text("calling"), ToolCall("c1", "now", {}))),
        Message("user", (ToolResult("c1", "boom", True), Text("and then?"))),
    ]
    model.complete(ModelRequest("", messages))
    assert sent(server)["messages"] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: boom"},
        {"role": "user", "content": "and then?"},
    ]


def test_an_empty_assistant_turn_is_sent_with_empty_content(server, model):
    server.side_effect = [ok(completion("ok"))]
    messages = [Message.user("a"), Message("assistant", ()), Message.user("b")]
    model.complete(ModelRequest("", messages))
    assert sent(server)["messages"][1] == {"role": "assistant", "content": ""}


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("any", "required"),
        ("weather", {"type": "function", "function": {"name": "weather"}}),
    ],
)
def test_tool_choice_is_mapped(server, model, choice, wire):
    server.side_effect = [ok(completion("x"))]
    model.complete(ask(tools=[weather.spec()], tool_choice=choice))
    assert sent(server)["tool_choice"] == wire


def test_no_tools_means_no_tools_field_and_extra_body_and_max_tokens_are_sent(server):
    server.side_effect = [ok(completion("x")), ok(completion("y"))]
    m = OpenAICompatModel(BASE, "m", max_tokens=64, extra_body={"temperature": 0.1})
    m.complete(ask())
    m.complete(ask(max_tokens=8))
    first, second = sent(server, 0), sent(server, 1)
    assert "tools" not in first and "tool_choice" not in first
    assert (first["max_tokens"], first["temperature"], second["max_tokens"]) == (64, 0.1, 8)
    assert "Authorization" not in server.calls[0].request.headers  # no key, no header
    m.close()


# -- secrets, configuration, pickling --------------------------------------------------


def test_the_api_key_is_sent_but_never_shown(server, model):
    events: list[Any] = []
    server.side_effect = [
        ok(completion(calls=[call("weather", '{"city": "X"}')], finish="tool_calls")),
        httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}),
    ]
    with pytest.raises(ModelError) as info:
        ReActLoop(model, [weather], on_event=events.append).run("Weather?")
    assert server.calls[0].request.headers["Authorization"] == f"Bearer {KEY}"
    shown = [
        str(info.value),
        repr(info.value),
        "".join(traceback.format_exception(info.value)),
        repr(model),
        json.dumps([event_to_dict(e) for e in events], default=str),
        json.dumps(info.value.result.to_state()),
    ]
    assert all(KEY not in text for text in shown)
    assert "[api key]" in str(info.value)


def test_the_api_key_is_not_in_a_connection_error(server, sleeps):
    server.side_effect = httpx.ConnectError(f"failed for {KEY}")
    m = OpenAICompatModel(BASE, "m", api_key=KEY, max_retries=0, sleep=sleeps)
    with pytest.raises(ModelError) as info:
        m.complete(ask())
    assert KEY not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_retries": -1}, "max_retries"),
        ({"structured": "tools"}, "structured"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_settings_are_configuration_errors(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        OpenAICompatModel(BASE, "m", **kwargs)


def test_a_model_pickles_by_its_settings_unless_it_has_your_http_client(server):
    server.side_effect = [ok(completion("from a copy"))]
    copy = pickle.loads(pickle.dumps(OpenAICompatModel(BASE, "m", api_key=KEY, max_tokens=5)))
    assert copy.complete(ask()).message.text == "from a copy"
    assert server.calls[0].request.headers["Authorization"] == f"Bearer {KEY}"
    assert sent(server)["max_tokens"] == 5
    with httpx.Client() as http, pytest.raises(TypeError, match="own http_client"):
        pickle.dumps(OpenAICompatModel(BASE, "m", http_client=http))


def test_your_http_client_is_used_and_left_open(server):
    server.side_effect = [ok(completion("x"))]
    with httpx.Client(headers={"X-Team": "a"}) as http:
        with OpenAICompatModel(BASE + "/", "m", http_client=http) as m:
            m.complete(ask())
        assert not http.is_closed
    assert server.calls[0].request.headers["X-Team"] == "a"
    assert str(server.calls[0].request.url) == BASE + "/chat/completions"
