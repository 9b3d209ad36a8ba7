"""OpenAICompatModel against a respx-mocked Chat Completions server."""

from __future__ import annotations

import json
import pickle
import re
import traceback
from typing import Any

import httpx
import pydantic
import pytest
import respx

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
    Usage,
    ask_structured,
    event_to_dict,
    tool,
)
from agentloops.model import OutputSchema

BASE = "http://llm.test/v1"
KEY = "sk-CANARY-0123456789abcdef"


def completion(
    content: str | None = None,
    *,
    calls: list[dict[str, Any]] | None = None,
    finish: str | None = "stop",
    usage: dict[str, Any] | None = None,
    **message: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if calls is not None:
        msg["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "qwen3:8b",
        "choices": [{"index": 0, "finish_reason": finish, "message": msg}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def call(name: str, arguments: Any, id: str | None = "call_1") -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        entry["id"] = id
    return entry


def ok(body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=body)


def sent(route: respx.Route, i: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[i].request.content)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def server():
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router.post("/chat/completions")


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def model(sleeps: Sleeps):
    with OpenAICompatModel(BASE, "qwen3:8b", api_key=KEY, sleep=sleeps) as m:
        yield m


weather_calls: list[str] = []


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    weather_calls.append(city)
    return f"18C in {city}"


@tool
def now() -> str:
    """The current time."""
    return "12:00"


@pytest.fixture(autouse=True)
def _reset_calls():
    weather_calls.clear()


def ask(text: str = "hi", **kw: Any) -> ModelRequest:
    return ModelRequest("", [Message.user(text)], **kw)


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
            "content": None,
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


@pytest.mark.parametrize("arguments", [{"city": "Oslo"}, json.dumps(json.dumps({"city": "Oslo"}))])
def test_arguments_sent_as_an_object_or_encoded_twice_are_accepted(server, model, arguments):
    server.side_effect = [ok(completion(calls=[call("weather", arguments)])), ok(completion("ok"))]
    ReActLoop(model, [weather]).run("Oslo?")
    assert weather_calls == ["Oslo"]


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


# -- retries ---------------------------------------------------------------------------


def test_429_then_200_waits_as_long_as_retry_after_says(server, model, sleeps):
    server.side_effect = [
        httpx.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}}),
        httpx.Response(503, headers={"retry-after-ms": "250"}),
        ok(completion("fine")),
    ]
    assert model.complete(ask()).message.text == "fine"
    assert sleeps == [2.0, 0.25]
    assert server.call_count == 3


def test_500_until_the_retries_run_out_is_a_model_error(server, sleeps):
    server.side_effect = [
        httpx.Response(500, headers={"x-request-id": f"req_{i}"}, json={"error": "overloaded"})
        for i in range(3)
    ]
    m = OpenAICompatModel(BASE, "m", max_retries=2, sleep=sleeps)
    with pytest.raises(ModelError) as info:
        m.complete(ask())
    assert (info.value.status, info.value.request_id) == (500, "req_2")
    assert "HTTP 500 (after 3 attempts): overloaded" in str(info.value)
    assert server.call_count == 3
    assert len(sleeps) == 2
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0  # backoff with jitter


def test_an_error_body_of_another_shape_is_quoted(server, model):
    server.side_effect = [httpx.Response(404, json={"detail": "no such model"})]
    with pytest.raises(ModelError, match=re.escape('HTTP 404: {"detail": "no such model"}')):
        model.complete(ask())


def test_a_400_is_not_retried(server, model, sleeps):
    server.side_effect = [
        httpx.Response(400, headers={"request-id": "r1"}, json={"error": {"message": "bad"}})
    ]
    with pytest.raises(ModelError, match="HTTP 400: bad") as info:
        model.complete(ask())
    assert (info.value.status, info.value.request_id, server.call_count) == (400, "r1", 1)
    assert sleeps == []


def test_a_connection_error_is_retried(server, model, sleeps):
    server.side_effect = [httpx.ConnectError("refused"), ok(completion("up again"))]
    assert model.complete(ask()).message.text == "up again"
    assert len(sleeps) == 1


def test_connection_errors_until_the_retries_run_out_are_a_model_error(server, sleeps):
    server.side_effect = httpx.ReadTimeout("too slow")
    m = OpenAICompatModel(BASE, "m", max_retries=1, sleep=sleeps)
    with pytest.raises(ModelError, match="after 2 attempts: ReadTimeout: too slow") as info:
        m.complete(ask())
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


@pytest.mark.parametrize(
    ("header", "wait"),
    [("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("soon", None), ("9999", 60.0), ("x", None)],
)
def test_retry_after_dates_garbage_and_huge_values(server, model, sleeps, header, wait):
    key = "retry-after-ms" if header == "x" else "retry-after"
    server.side_effect = [httpx.Response(429, headers={key: header}), ok(completion("ok"))]
    model.complete(ask())
    if wait is None:
        assert 0.375 <= sleeps[0] <= 0.5  # unusable header: plain backoff
    else:
        assert sleeps == [wait]


# -- structured output -----------------------------------------------------------------


class City(pydantic.BaseModel):
    name: str
    population: int


def test_structured_output_through_response_format(server, model):
    server.side_effect = [ok(completion('{"name": "Oslo", "population": 700000}'))]
    reply = ask_structured(model, City, "Biggest city in Norway?")
    assert reply.value == City(name="Oslo", population=700000)
    body = sent(server)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "City"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["name", "population"]
    assert "messages" in body and body["messages"][0]["role"] == "user"


def test_structured_output_falls_back_to_the_prompt_when_the_server_rejects_the_format(
    server, model
):
    server.side_effect = [
        httpx.Response(400, json={"error": {"message": "response_format is not supported"}}),
        ok(completion('```json\n{"name": "Oslo", "population": 1}\n```')),
        ok(completion('{"name": "Rome", "population": 2}')),
    ]
    assert ask_structured(model, City, "Norway?", system="Be exact.").value.name == "Oslo"
    assert ask_structured(model, City, "Italy?").value.name == "Rome"
    first, second, third = (sent(server, i) for i in range(3))
    assert "response_format" in first
    assert "response_format" not in second and "response_format" not in third  # remembered
    system = second["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be exact.")
    assert '"population"' in system["content"] and "JSON Schema" in system["content"]
    assert model.structured == "prompt"


def test_structured_prompt_mode_never_sends_response_format(server):
    server.side_effect = [ok(completion("not json")), ok(completion('{"name":"A","population":1}'))]
    m = OpenAICompatModel(BASE, "m", structured="prompt")
    request = ModelRequest("", [Message.user("x")], output=OutputSchema("City!", {}))
    assert m.complete(request).output is None  # unparseable: ask_structured re-asks
    assert ask_structured(m, City, "x").value.name == "A"
    assert all("response_format" not in sent(server, i) for i in range(2))


def test_json_schema_mode_does_not_fall_back(server):
    server.side_effect = [httpx.Response(400, text="unknown field response_format")]
    m = OpenAICompatModel(BASE, "m", structured="json_schema")
    with pytest.raises(ModelError, match="HTTP 400: unknown field response_format"):
        m.complete(ModelRequest("", [Message.user("x")], output=OutputSchema("C", {})))


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
