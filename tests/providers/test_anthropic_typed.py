"""A typed run through AnthropicModel over respx: native JSON output next to the tools, the
final-answer tool (forced where the thinking setting allows, `auto` under manual thinking),
the learned move from native to the tool when the API refuses native output, and partial
output streamed from either."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic
import pytest
import respx
from _anthropic_helpers import (
    EPHEMERAL,
    bodies,
    error,
    make_async_model,
    make_model,
    make_tools,
    reply,
    streamed,
    text,
    tool_use,
)

from agentloops import (
    Message,
    ModelError,
    ModelRequest,
    OutputDelta,
    OutputSchema,
    ReActLoop,
    ReWOOPipeline,
)
from agentloops.testing import respond_structured


class City(pydantic.BaseModel):
    name: str
    population: int


OSLO = {"name": "Oslo", "population": 700000}


def final_use(call_id: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "final_answer", "input": answer}


REFUSED = "output_config.format: structured outputs are not supported by this model"


def test_native_output_goes_next_to_the_tools_and_the_json_answer_is_the_output(
    messages_route: respx.Route,
) -> None:
    log: list[str] = []
    messages_route.side_effect = [
        reply(text("Let me look."), tool_use("toolu_1", query="oslo"), stop_reason="tool_use"),
        reply(text(json.dumps(OSLO))),
    ]
    result = ReActLoop(make_model(), make_tools(log), output_type=City).run("Biggest city?")
    assert result.output == City(**OSLO) and log == ["oslo"]
    first, second = bodies(messages_route)
    assert [t["name"] for t in first["tools"]] == ["lookup", "explode"]  # no final tool
    assert first["tool_choice"] == {"type": "auto"}
    assert first["output_config"]["format"]["schema"]["additionalProperties"] is False
    assert first["thinking"] == {"type": "adaptive"}
    assert second["output_config"] == first["output_config"]


@pytest.mark.parametrize(
    ("thinking", "choice"),
    [
        ("adaptive", {"type": "any"}),
        (None, {"type": "any"}),
        ({"type": "enabled", "budget_tokens": 2048}, {"type": "auto"}),  # no forcing allowed
    ],
)
def test_the_final_answer_tool_is_offered_last_and_forced_where_allowed(
    messages_route: respx.Route, thinking: Any, choice: dict[str, Any]
) -> None:
    log: list[str] = []
    messages_route.side_effect = [
        reply(tool_use("toolu_1", query="oslo"), stop_reason="tool_use"),
        reply(final_use("toolu_2", OSLO), stop_reason="tool_use"),
    ]
    model = make_model(structured="tool", thinking=thinking)
    result = ReActLoop(model, make_tools(log), output_type=City, system="Be brief.").run("City?")
    assert result.output == City(**OSLO)
    body = bodies(messages_route)[0]
    final = body["tools"][-1]
    assert final["name"] == "final_answer" and final["cache_control"] == EPHEMERAL
    assert final["input_schema"]["required"] == ["name", "population"]
    assert "output_config" not in body
    assert body["tool_choice"] == choice
    assert body["system"][0]["text"].startswith("Be brief.")
    assert "calling the final_answer tool" in body["system"][0]["text"]
    assert result.messages[-1].tool_results[0].content == "final answer accepted"


def test_a_request_without_tools_forces_the_final_tool(messages_route: respx.Route) -> None:
    plan = {
        "steps": [
            {
                "step_id": "#E1",
                "description": "x",
                "tool_name": "lookup",
                "tool_args": {"query": "oslo"},
            }
        ]
    }
    messages_route.side_effect = [
        reply(text(json.dumps(plan))),
        reply(final_use("toolu_9", OSLO), stop_reason="tool_use"),
    ]
    model = make_model(structured="tool")
    result = ReWOOPipeline(model, make_tools([]), output_type=City).run("City?")
    assert result.output == City(**OSLO)
    planner, solver = bodies(messages_route)
    assert planner["tool_choice"] == {"type": "tool", "name": "final_answer"}  # the plan too
    assert solver["tools"][0]["name"] == "final_answer" and len(solver["tools"]) == 1
    assert solver["tool_choice"] == {"type": "tool", "name": "final_answer"}


def test_auto_moves_to_the_tool_for_good_when_native_output_is_refused(
    messages_route: respx.Route,
) -> None:
    messages_route.side_effect = [
        error(400, "invalid_request_error", REFUSED),
        reply(final_use("toolu_1", OSLO), stop_reason="tool_use"),
        reply(final_use("toolu_2", OSLO), stop_reason="tool_use"),
    ]
    model = make_model()
    request = ModelRequest(
        "", [Message.user("City?")], output=OutputSchema("City", City.model_json_schema())
    )
    assert model.complete(request).output == OSLO
    assert model.complete(request).output == OSLO
    sent = bodies(messages_route)
    assert ["output_config" in b for b in sent] == [True, False, False]  # learned
    names = [[t["name"] for t in b.get("tools", [])] for b in sent]
    assert names == [[], ["final_answer"], ["final_answer"]]
    assert messages_route.call_count == 3  # the refusal was not retried by the SDK


@pytest.mark.parametrize(
    ("structured", "message"),
    [("native", REFUSED), ("auto", "messages.0: something else is wrong")],
)
def test_a_refusal_is_an_error_when_native_was_chosen_or_the_400_is_about_something_else(
    messages_route: respx.Route, structured: str, message: str
) -> None:
    messages_route.side_effect = [error(400, "invalid_request_error", message)]
    request = ModelRequest("", [Message.user("q")], output=OutputSchema("City", {"type": "object"}))
    with pytest.raises(ModelError, match="400"):
        make_model(structured=structured).complete(request)  # type: ignore[arg-type]


def test_a_plain_request_is_never_taken_for_a_refusal(messages_route: respx.Route) -> None:
    messages_route.side_effect = [error(400, "invalid_request_error", REFUSED)]
    with pytest.raises(ModelError):
        make_model().complete(ModelRequest("", [Message.user("q")]))


def test_a_tool_named_like_the_final_tool_is_refused_before_any_call() -> None:
    from agentloops import ConfigurationError, ToolSpec

    request = ModelRequest(
        "",
        [Message.user("q")],
        tools=[ToolSpec("final_answer", "mine", {"type": "object"})],
        output=OutputSchema("City", {"type": "object"}),
    )
    with pytest.raises(ConfigurationError, match="final-answer tool"):
        make_model(structured="tool").complete(request)


@pytest.mark.parametrize("structured", ["native", "tool"])
@pytest.mark.parametrize("way", ["stream", "astream"])
def test_partial_output_streams_from_either_mechanism(
    messages_route: respx.Route, structured: str, way: str
) -> None:
    answer = {"name": "Oslo, the capital of Norway", "population": 700000}
    if structured == "native":
        messages_route.side_effect = [streamed(text(json.dumps(answer)))]
    else:
        messages_route.side_effect = [
            streamed(
                text("Here it is."),
                final_use("toolu_1", answer),
                stop_reason="tool_use",
            )
        ]
    model = (
        make_model(structured=structured)
        if way == "stream"
        else make_async_model(structured=structured)
    )
    loop = ReActLoop(model, [], output_type=City)
    if way == "stream":
        items = list(loop.stream("City?"))
    else:

        async def drain() -> list[Any]:
            return [item async for item in loop.astream("City?")]

        items = asyncio.run(drain())
    *events, result = items
    deltas = [e for e in events if isinstance(e, OutputDelta)]
    assert deltas[-1].final and deltas[-1].output == result.output == City(**answer)
    names = [d.data.get("name", "") for d in deltas[:-1]]
    assert any(0 < len(n) < len(answer["name"]) for n in names)
    assert deltas[-2].data == answer


def test_the_fake_and_the_real_client_give_the_loop_the_same_output(
    messages_route: respx.Route,
) -> None:
    from agentloops.testing import ScriptedModel

    messages_route.side_effect = [reply(text(json.dumps(OSLO)))]
    real = ReActLoop(make_model(), [], output_type=City).run("City?")
    fake = ReActLoop(ScriptedModel([respond_structured(OSLO)]), [], output_type=City).run("City?")
    assert real.output == fake.output and real.answer == fake.answer
