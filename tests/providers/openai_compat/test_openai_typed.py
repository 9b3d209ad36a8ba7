"""A typed run through OpenAICompatModel over respx, for each mechanism: json_schema next to
the tools, the final-answer function when a server refuses `response_format` with tools
(learned apart from tool-less requests), the prompt when it also refuses `tool_choice`, the
json_object and prompt mechanisms of a tool-less answer, and partial output streamed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pydantic
import pytest
from _openai_fakes import BASE, KEY, call, completion, ok, sent, weather, weather_calls

from agentloops import (
    OpenAICompatModel,
    OutputDelta,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    ask_structured,
)


class Forecast(pydantic.BaseModel):
    city: str
    temp_c: int


PARIS = {"city": "Paris", "temp_c": 18}
NO_FORMAT_WITH_TOOLS = {"error": {"message": "response_format is not supported with tools"}}
NO_TOOL_CHOICE = {"error": {"message": "tool_choice 'required' is not supported"}}


def weather_turn() -> dict[str, Any]:
    return completion(calls=[call("weather", '{"city": "Paris"}', "call_w")], finish="tool_calls")


def final_turn(arguments: Any = PARIS, id: str = "call_f") -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return completion(calls=[call("final_answer", args, id)], finish="tool_calls")


def test_json_schema_goes_next_to_the_tools(server, model) -> None:
    server.side_effect = [ok(weather_turn()), ok(completion(json.dumps(PARIS)))]
    result = ReActLoop(model, [weather], output_type=Forecast).run("Weather in Paris?")
    assert result.output == Forecast(**PARIS) and weather_calls == ["Paris"]
    first = sent(server, 0)
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "Forecast"
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    assert first["tool_choice"] == "auto"


def test_a_server_refusing_response_format_with_tools_gets_the_final_answer_function(
    server, model
) -> None:
    server.side_effect = [
        httpx.Response(400, json=NO_FORMAT_WITH_TOOLS),
        ok(weather_turn()),
        ok(final_turn()),
        ok(completion('{"name": "Oslo", "population": 1}')),  # a tool-less request
        ok(final_turn(id="call_g")),  # a second run with tools: the tool at once
    ]
    loop = ReActLoop(model, [weather], output_type=Forecast, system="Be exact.")
    assert loop.run("Weather?").output == Forecast(**PARIS)
    bodies = [sent(server, i) for i in range(3)]
    assert "response_format" in bodies[0]
    for body in bodies[1:]:
        assert "response_format" not in body
        assert [t["function"]["name"] for t in body["tools"]] == ["weather", "final_answer"]
        assert body["tools"][1]["function"]["parameters"]["required"] == ["city", "temp_c"]
        assert body["tool_choice"] == "required"
        system = body["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("Be exact.")
        assert "calling the final_answer function" in system["content"]
    # learned for requests with tools only: a tool-less one still gets json_schema
    from _openai_fakes import City

    assert ask_structured(model, City, "Norway?").value.name == "Oslo"
    assert sent(server, 3)["response_format"]["type"] == "json_schema"
    assert loop.run("Again?").output == Forecast(**PARIS)
    assert "response_format" not in sent(server, 4) and sent(server, 4)["tool_choice"] == "required"
    assert server.call_count == 5


def test_a_server_refusing_both_gets_the_schema_in_the_prompt(server, model) -> None:
    server.side_effect = [
        httpx.Response(400, json=NO_FORMAT_WITH_TOOLS),
        httpx.Response(400, json=NO_TOOL_CHOICE),
        ok(weather_turn()),
        ok(completion("```json\n" + json.dumps(PARIS) + "\n```")),
    ]
    result = ReActLoop(model, [weather], output_type=Forecast).run("Weather?")
    assert result.output == Forecast(**PARIS)
    body = sent(server, 2)
    assert "response_format" not in body and body["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in body["tools"]] == ["weather"]
    system = body["messages"][0]["content"]
    assert system.startswith("When you give your final answer, reply with only a JSON object")
    assert '"temp_c"' in system


def test_final_answer_arguments_that_are_not_json_go_back_to_the_model(server) -> None:
    model = OpenAICompatModel(BASE, "m", api_key=KEY, structured="tool")
    server.side_effect = [ok(final_turn('{"city": "Paris", temp')), ok(final_turn(id="call_2"))]
    result = ReActLoop(model, [weather], output_type=Forecast).run("Weather?")
    assert result.output == Forecast(**PARIS)
    returned = sent(server, 1)["messages"]
    assert returned[-2]["tool_calls"][0]["function"]["arguments"] == "{}"  # echoed harmlessly
    assert returned[-1]["role"] == "tool" and "not valid JSON" in returned[-1]["content"]


def test_the_tool_mode_for_a_tool_less_answer_names_the_function(server) -> None:
    model = OpenAICompatModel(BASE, "m", api_key=KEY, structured="tool")
    plan = {"steps": [{"step_number": 1, "description": "weather in Paris"}]}
    server.side_effect = [
        ok(final_turn(plan, "call_p")),
        ok(weather_turn()),
        ok(completion("18C in Paris")),
        ok(final_turn(id="call_r")),
    ]
    result = PlanAndExecute(model, [weather], output_type=Forecast).run("Weather?")
    assert result.output == Forecast(**PARIS)
    reporter = sent(server, 3)
    assert [t["function"]["name"] for t in reporter["tools"]] == ["final_answer"]
    assert reporter["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    step = sent(server, 1)
    assert [t["function"]["name"] for t in step["tools"]] == ["weather"]  # steps: untyped


@pytest.mark.parametrize("mode", ["json_object", "prompt"])
def test_a_tool_less_answer_through_json_object_or_the_prompt(server, mode: str) -> None:
    model = OpenAICompatModel(BASE, "m", api_key=KEY, structured=mode)  # type: ignore[arg-type]
    plan = {
        "steps": [
            {
                "step_id": "#E1",
                "description": "w",
                "tool_name": "weather",
                "tool_args": {"city": "Paris"},
            }
        ]
    }
    server.side_effect = [ok(completion(json.dumps(plan))), ok(completion(json.dumps(PARIS)))]
    result = ReWOOPipeline(model, [weather], output_type=Forecast).run("Weather?")
    assert result.output == Forecast(**PARIS)
    solver = sent(server, 1)
    assert solver.get("response_format", {}).get("type") == (
        "json_object" if mode == "json_object" else None
    )
    assert solver["messages"][0]["content"].count("Reply with only a JSON object") == 1


# -- streaming -----------------------------------------------------------------------------


def sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def text_chunks(text: str, size: int = 6) -> list[dict[str, Any]]:
    parts = [delta(content=text[i : i + size]) for i in range(0, len(text), size)]
    return [*parts, delta(finish="stop")]


def call_chunks(arguments: str, size: int = 6) -> list[dict[str, Any]]:
    first = {
        "index": 0,
        "id": "call_s",
        "type": "function",
        "function": {"name": "final_answer", "arguments": ""},
    }
    parts = [
        delta(tool_calls=[{"index": 0, "function": {"arguments": arguments[i : i + size]}}])
        for i in range(0, len(arguments), size)
    ]
    return [delta(tool_calls=[first]), *parts, delta(finish="tool_calls")]


LONG = {"city": "Paris, France, in the rain", "temp_c": 18}


@pytest.mark.parametrize("mode", ["json_schema", "tool"])
@pytest.mark.parametrize("way", ["stream", "astream"])
def test_partial_output_streams_from_text_or_the_final_function(server, mode: str, way: str):
    model = OpenAICompatModel(BASE, "m", api_key=KEY, structured=mode)  # type: ignore[arg-type]
    chunks = (
        text_chunks(json.dumps(LONG)) if mode == "json_schema" else call_chunks(json.dumps(LONG))
    )
    server.side_effect = [sse(*chunks)]
    loop = ReActLoop(model, [weather], output_type=Forecast)
    if way == "stream":
        items = list(loop.stream("Weather?"))
    else:

        async def run() -> list[Any]:
            return [item async for item in loop.astream("Weather?")]

        items = asyncio.run(run())
    *events, result = items
    deltas = [e for e in events if isinstance(e, OutputDelta)]
    assert deltas[-1].final and deltas[-1].output == result.output == Forecast(**LONG)
    cities = [d.data.get("city", "") for d in deltas[:-1]]
    assert any(0 < len(c) < len(LONG["city"]) for c in cities)
    assert deltas[-2].data == LONG
