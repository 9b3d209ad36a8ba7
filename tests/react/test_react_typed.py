"""A typed ReAct run (`output_type=`): the answer validated, sent back when wrong, checked by
an `output_validator`, bounded by `max_output_retries`, the transcript valid throughout; the
final-answer tool beside real tools; a tool's `ModelRetry`. Every test that takes
`ReActLoop` runs under both drivers."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pydantic
import pytest

from agentloops import (
    ConfigurationError,
    InvalidOutput,
    Message,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    OutputContext,
    ReActResult,
    RunError,
    Text,
    ToolCall,
    Usage,
    tool,
    validate_transcript,
)
from agentloops.testing import FunctionModel, ScriptedModel, respond, respond_structured, use_tools


class Weather(pydantic.BaseModel):
    city: str
    temp_c: float
    sky: Literal["sunny", "cloudy", "rain"]


RAN: list[str] = []


@tool
def weather(city: str) -> str:
    """The weather now in a city."""
    RAN.append(city)
    return '{"Paris": "18C, rain", "Rome": "24C, sunny"}'


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


PARIS = {"city": "Paris", "temp_c": 18, "sky": "rain"}


def test_the_answer_is_the_validated_instance_and_its_json(ReActLoop) -> None:
    model = ScriptedModel([use_tools(("weather", {"city": "Paris"})), respond_structured(PARIS)])
    result = ReActLoop(model, [weather], output_type=Weather).run("Weather in Paris?")
    assert result.stop_reason == "answered"
    assert result.output == Weather(city="Paris", temp_c=18.0, sky="rain")
    assert Weather.model_validate_json(result.answer) == result.output
    assert (result.model_calls, result.tool_calls, RAN) == (2, 1, ["Paris"])
    request = model.requests[0]
    assert request.output is not None and request.output.name == "Weather"
    assert request.output.tool == "final_answer" and [t.name for t in request.tools] == ["weather"]
    validate_transcript(result.messages)


def test_an_untyped_run_has_no_output_and_sends_no_schema(ReActLoop) -> None:
    model = ScriptedModel(["Paris."])
    result = ReActLoop(model, []).run("Capital?")
    assert (result.output, result.answer) == (None, "Paris.")
    assert model.requests[0].output is None


def test_invalid_then_valid_sends_each_bad_field_back(ReActLoop) -> None:
    bad = {"city": "Paris", "temp_c": "warm", "sky": "snow"}
    model = ScriptedModel([respond_structured(bad), respond_structured(PARIS)])
    result = ReActLoop(model, [weather], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    note = model.requests[1].messages[-1].text
    assert "temp_c" in note and "sky" in note and "did not validate" in note
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    validate_transcript(result.messages)


def test_a_reply_that_is_no_json_at_all_is_an_invalid_answer(ReActLoop) -> None:
    model = ScriptedModel(["It rains in Paris.", respond_structured(PARIS)])
    result = ReActLoop(model, [], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    assert "Invalid JSON" in model.requests[1].messages[-1].text


def test_a_text_reply_of_plain_json_is_read_without_the_clients_output(ReActLoop) -> None:
    model = ScriptedModel(['```json\n{"city": "Rome", "temp_c": 24, "sky": "sunny"}\n```'])
    result = ReActLoop(model, [], output_type=Weather).run("Weather?")
    assert result.output == Weather(city="Rome", temp_c=24, sky="sunny")


def test_past_max_output_retries_the_run_stops_invalid_output_with_the_last_error(
    ReActLoop,
) -> None:
    bad = respond_structured({"city": "Paris"})
    model = ScriptedModel([bad, bad, bad, respond_structured({"city": 1})])
    result = ReActLoop(model, [], output_type=Weather, max_output_retries=3).run("Weather?")
    assert result.stop_reason == "invalid_output"
    assert (result.output, result.answer, result.model_calls) == (None, "", 4)
    assert "max_output_retries=3" in result.detail and "city: Input should be" in result.detail
    validate_transcript(result.messages)  # nothing lost: every answer is in the transcript
    assert len(result.messages) == 8
    with pytest.raises(InvalidOutput) as raised:
        result.raise_for_stop()
    assert raised.value.result is result


def test_max_output_retries_zero_allows_one_answer(ReActLoop) -> None:
    model = ScriptedModel([respond_structured({"city": "Paris"})])
    loop = ReActLoop(model, [], output_type=Weather, max_output_retries=0)
    assert loop.run("Weather?").stop_reason == "invalid_output"


def test_a_validator_that_retries_sends_its_message_back(ReActLoop) -> None:
    seen: list[OutputContext] = []

    def check(out: Weather, context: OutputContext) -> Weather:
        seen.append(context)
        tool_results = [r.content for m in context.messages for r in m.tool_results]
        if str(int(out.temp_c)) not in " ".join(tool_results):
            raise ModelRetry(f"{out.temp_c} C is in no tool output; copy the figure")
        return out

    script = [
        use_tools(("weather", {"city": "Paris"}), usage=Usage(input_tokens=3)),
        respond_structured({**PARIS, "temp_c": 21}, usage=Usage(input_tokens=5)),
        respond_structured(PARIS),
    ]
    model = ScriptedModel(script)
    loop = ReActLoop(model, [weather], output_type=Weather, output_validator=check)
    result = loop.run("Weather?", run_id="r-check")
    assert result.output == Weather(**PARIS)
    assert "21.0 C is in no tool output" in model.requests[2].messages[-1].text
    assert "was not accepted" in model.requests[2].messages[-1].text
    assert [c.retries for c in seen] == [0, 1]
    first = seen[0]
    assert (first.run_id, first.loop, first.usage.input_tokens) == ("r-check", "react", 8)
    assert first.messages[-1].role == "assistant" and len(first.messages) == 4


def test_an_async_validator_may_change_the_output(ReActLoop) -> None:
    async def rounded(out: Weather, context: OutputContext) -> Weather:
        await asyncio.sleep(0)
        return out.model_copy(update={"temp_c": round(out.temp_c)})

    model = ScriptedModel([respond_structured({**PARIS, "temp_c": 17.6})])
    loop = ReActLoop(model, [], output_type=Weather, output_validator=rounded)
    result = loop.run("Weather?")
    assert result.output.temp_c == 18
    assert '"temp_c": 18' in result.answer  # the answer is the output that was kept


def test_a_validator_that_returns_none_keeps_the_output(ReActLoop) -> None:
    model = ScriptedModel([respond_structured(PARIS)])
    loop = ReActLoop(model, [], output_type=Weather, output_validator=lambda out, ctx: None)
    assert loop.run("Weather?").output == Weather(**PARIS)


def test_validator_retries_and_validation_errors_share_one_bound(ReActLoop) -> None:
    def never(out: Weather, context: OutputContext) -> Weather:
        raise ModelRetry("no")

    model = ScriptedModel([respond_structured({}), respond_structured(PARIS)])
    loop = ReActLoop(model, [], output_type=Weather, output_validator=never, max_output_retries=1)
    result = loop.run("Weather?")
    assert result.stop_reason == "invalid_output"
    assert result.detail.endswith("Your final answer was not accepted: no")


@pytest.mark.parametrize(
    ("validator", "match"),
    [
        (lambda out, ctx: 1 / 0, "output_validator raised ZeroDivisionError"),
        (lambda out, ctx: {"city": 3}, "returned a value that is not a valid Weather"),
    ],
)
def test_a_validator_that_breaks_fails_the_run_with_its_partial_result(
    ReActLoop, validator: Any, match: str
) -> None:
    model = ScriptedModel([respond_structured(PARIS)])
    loop = ReActLoop(model, [], output_type=Weather, output_validator=validator)
    with pytest.raises(RunError, match=match) as raised:
        loop.run("Weather?")
    assert raised.value.result.stop_reason == "error"
    assert raised.value.result.model_calls == 1


# -- the final-answer tool -----------------------------------------------------------------


def test_a_final_answer_tool_call_is_the_answer_and_the_transcript_ends_valid(ReActLoop) -> None:
    final = ToolCall("call_final", "final_answer", PARIS)
    model = ScriptedModel([use_tools(("weather", {"city": "Paris"})), use_tools(final)])
    result = ReActLoop(model, [weather], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    last = result.messages[-1]
    assert last.role == "user" and last.tool_results[0].content == "final answer accepted"
    assert not last.tool_results[0].is_error
    validate_transcript(result.messages)


def test_the_final_tool_beside_real_calls_accepted_runs_none_of_them(ReActLoop) -> None:
    turn = use_tools(("weather", {"city": "Rome"}), ToolCall("f1", "final_answer", PARIS))
    result = ReActLoop(ScriptedModel([turn]), [weather], output_type=Weather).run("Weather?")
    assert (result.output, RAN, result.tool_calls) == (Weather(**PARIS), [], 0)
    results = result.messages[-1].tool_results
    assert [r.content.split(":")[0] for r in results] == ["not run", "final answer accepted"]
    validate_transcript(result.messages)


def test_the_final_tool_beside_real_calls_rejected_runs_them_and_returns_both(ReActLoop) -> None:
    turn = use_tools(
        ("weather", {"city": "Rome"}),
        ToolCall("f1", "final_answer", {"city": "Rome"}),
        ("weather", {"city": "Paris"}),
    )
    model = ScriptedModel([turn, use_tools(ToolCall("f2", "final_answer", PARIS))])
    result = ReActLoop(model, [weather], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    assert sorted(RAN) == ["Paris", "Rome"] and result.tool_calls == 2
    answered = model.requests[1].messages[-1].tool_results
    assert [r.call_id for r in answered] == [c.id for c in turn.message.tool_calls]  # in order
    assert answered[1].is_error and "temp_c: Field required" in answered[1].content
    assert "18C" in answered[0].content and not answered[0].is_error


def test_a_rejected_final_call_beside_a_call_that_needs_approval_pauses_and_resumes(
    ReActLoop,
) -> None:
    @tool(requires_approval=True, read_only=False)
    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city}"

    turn = use_tools(("book", {"city": "Rome"}), ToolCall("f1", "final_answer", {}))
    model = ScriptedModel([turn, use_tools(ToolCall("f2", "final_answer", PARIS))])
    loop = ReActLoop(model, [book], output_type=Weather)
    paused = loop.run("Book and tell the weather")
    assert paused.stop_reason == "approval_required" and paused.output is None
    assert [r.call_id for r in paused.held_results] == ["f1"]
    done = loop.resume(paused, {paused.pending_approvals[0].id: True})
    assert done.output == Weather(**PARIS)
    validate_transcript(done.messages)


def test_a_tool_named_like_the_final_answer_tool_moves_the_final_tool_aside(ReActLoop) -> None:
    @tool
    def final_answer(text: str) -> str:
        """The user's own tool."""
        return "mine"

    final = ToolCall("f1", "final_answer_2", PARIS)
    model = ScriptedModel([use_tools(("final_answer", {"text": "x"})), use_tools(final)])
    result = ReActLoop(model, [final_answer], output_type=Weather).run("Weather?")
    assert model.requests[0].output.tool == "final_answer_2"
    assert result.messages[2].tool_results[0].content == "mine"
    assert result.output == Weather(**PARIS)


def test_a_clash_made_after_construction_is_a_configuration_error() -> None:
    from agentloops import ReActLoop, ToolRegistry

    def echo(text: str) -> str:
        """Echo."""
        return text

    loop = ReActLoop(ScriptedModel([]), [], output_type=Weather)
    loop.tools = ToolRegistry([tool(echo, name="final_answer")])
    with pytest.raises(ConfigurationError, match="final-answer tool"):
        loop.run("x")


# -- output types pydantic validates -------------------------------------------------------


class Item(pydantic.BaseModel):
    name: str


@pytest.mark.parametrize(
    ("output_type", "data", "expected"),
    [
        (list[Item], {"result": [{"name": "a"}]}, [Item(name="a")]),
        (Literal["buy", "hold", "sell"], {"result": "hold"}, "hold"),
        (int | str, {"result": 3}, 3),
        (dict[str, int], {"a": 1}, {"a": 1}),
    ],
)
def test_any_type_pydantic_validates(ReActLoop, output_type: Any, data: Any, expected: Any) -> None:
    model = ScriptedModel([respond_structured(data)])
    result = ReActLoop(model, [], output_type=output_type).run("Give it.")
    assert result.output == expected
    schema = model.requests[0].output.schema
    assert schema["type"] == "object"  # a non-object type is wrapped as {"result": ...}


def test_a_type_pydantic_cannot_describe_is_a_configuration_error() -> None:
    from agentloops import ReActLoop

    with pytest.raises(ConfigurationError, match="output_type"):
        ReActLoop(ScriptedModel([]), [], output_type=threading_lock_type())
    with pytest.raises(ConfigurationError, match="needs an output_type"):
        ReActLoop(ScriptedModel([]), [], output_validator=lambda o, c: o)
    with pytest.raises(ConfigurationError, match="max_output_retries must be >= 0"):
        ReActLoop(ScriptedModel([]), [], output_type=Weather, max_output_retries=-1)
    with pytest.raises(ConfigurationError, match="must be callable"):
        ReActLoop(ScriptedModel([]), [], output_type=Weather, output_validator="no")  # type: ignore[arg-type]


def threading_lock_type() -> type:
    import threading

    return type(threading.Lock())


# -- stop reasons a typed run shares with any run -----------------------------------------


def test_a_refusal_stops_the_run_without_output(ReActLoop) -> None:
    model = ScriptedModel([respond("I can't.", stop_reason="refusal")])
    result = ReActLoop(model, [], output_type=Weather).run("Weather?")
    assert (result.stop_reason, result.output) == ("refused", None)


def test_a_cut_off_answer_is_sent_back_as_cut_off(ReActLoop) -> None:
    model = ScriptedModel(
        [respond('{"city": "Par', stop_reason="max_tokens"), respond_structured(PARIS)]
    )
    result = ReActLoop(model, [], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    assert "cut off by the output limit" in model.requests[1].messages[-1].text


def test_answer_at_limit_takes_a_typed_answer_from_the_last_call(ReActLoop) -> None:
    script = [
        use_tools(("weather", {"city": "Paris"})),
        use_tools(ToolCall("f", "final_answer", PARIS)),
    ]
    model = ScriptedModel(script)
    loop = ReActLoop(model, [weather], output_type=Weather, max_steps=1, answer_at_limit=True)
    result = loop.run("Weather?")
    assert (result.stop_reason, result.output) == ("max_steps", Weather(**PARIS))
    assert model.requests[1].tool_choice == "none" and model.requests[1].output is not None
    validate_transcript(result.messages)


def test_answer_at_limit_with_an_invalid_answer_has_no_output(ReActLoop) -> None:
    script = [use_tools(("weather", {"city": "Paris"})), respond_structured({"city": "Paris"})]
    loop = ReActLoop(
        ScriptedModel(script), [weather], output_type=Weather, max_steps=1, answer_at_limit=True
    )
    result = loop.run("Weather?")
    assert (result.stop_reason, result.output, result.answer) == ("max_steps", None, "")


# -- the result's state ----------------------------------------------------------------------


def test_to_state_keeps_the_output_as_json_and_from_state_rebuilds_it() -> None:
    from agentloops import ReActLoop

    result = ReActLoop(ScriptedModel([respond_structured(PARIS)]), [], output_type=Weather).run("w")
    state = result.to_state()
    assert state["output"] == {"city": "Paris", "temp_c": 18.0, "sky": "rain"}
    import json

    restored = ReActResult.from_state(json.loads(json.dumps(state)), output_type=Weather)
    assert restored == result
    assert ReActResult.from_state(state).output == state["output"]  # without the type: JSON
    with pytest.raises(ValueError):
        ReActResult.from_state({**state, "output": {"city": 1}}, output_type=Weather)


# -- ModelRetry from a tool --------------------------------------------------------------------


def test_a_tool_asking_for_a_retry_gives_the_model_its_message(ReActLoop) -> None:
    @tool
    def lookup(city: str) -> str:
        """Look up a city (English names)."""
        if city == "Köln":
            raise ModelRetry("use the English name: Cologne")
        return f"{city}: 12C"

    script = [
        use_tools(("lookup", {"city": "Köln"})),
        use_tools(("lookup", {"city": "Cologne"})),
        "12C",
    ]
    model = ScriptedModel(script)
    result = ReActLoop(model, [lookup]).run("Weather in Köln?")
    first = model.requests[1].messages[-1].tool_results[0]
    assert (first.content, first.is_error) == ("use the English name: Cologne", True)
    assert result.answer == "12C" and result.tool_calls == 2


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_a_tool_at_its_retry_limit_says_its_retries_are_spent_and_the_run_goes_on(
    ReActLoop, retries: int
) -> None:
    @tool(retries=retries)
    def picky(x: int) -> str:
        """Never happy."""
        raise ModelRetry("try another x")

    calls = [use_tools(("picky", {"x": i})) for i in range(retries + 1)]
    model = ScriptedModel([*calls, "I give up on picky."])
    result = ReActLoop(model, [picky], max_repeats=None).run("Use picky.")
    assert result.answer == "I give up on picky."
    texts = [model.requests[i + 1].messages[-1].tool_results[0].content for i in range(retries + 1)]
    assert all(t.startswith("try another x") for t in texts)
    assert ["spent" in t for t in texts] == [False] * retries + [True]
    assert f"retries={retries}" in texts[-1]


def test_the_count_is_per_tool_and_in_a_row(ReActLoop) -> None:
    moods = iter(["retry", "ok", "retry", "retry"])

    @tool
    def moody(x: int) -> str:
        """Sometimes asks again."""
        if next(moods) == "retry":
            raise ModelRetry("again")
        return "fine"

    model = ScriptedModel([*(use_tools(("moody", {"x": i})) for i in range(4)), "done"])
    ReActLoop(model, [moody], max_repeats=None).run("q")
    texts = [model.requests[i].messages[-1].tool_results[0].content for i in range(1, 5)]
    assert texts[:3] == ["again", "fine", "again"]  # the ok call broke the run of retries
    assert "retries are spent" in texts[3]


def test_parallel_calls_of_one_tool_count_in_the_order_asked(ReActLoop) -> None:
    @tool
    def picky(x: int) -> str:
        """Never happy."""
        raise ModelRetry(f"not {x}")

    model = ScriptedModel([use_tools(("picky", {"x": 1}), ("picky", {"x": 2})), "ok"])
    ReActLoop(model, [picky]).run("q")
    first, second = model.requests[1].messages[-1].tool_results
    assert first.content == "not 1" and "retries are spent" in second.content


def test_a_function_model_can_answer_through_the_final_tool_of_the_request(ReActLoop) -> None:
    def brain(request: ModelRequest) -> ModelResponse:
        assert request.output is not None
        return use_tools(ToolCall("f", request.output.tool, PARIS))

    result = ReActLoop(FunctionModel(brain), [], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)


def test_an_empty_reply_is_an_invalid_answer_not_a_nudge(ReActLoop) -> None:
    empty = ModelResponse(Message("assistant", (Text(" "),)), "end_turn")
    model = ScriptedModel([empty, respond_structured(PARIS)])
    result = ReActLoop(model, [], output_type=Weather).run("Weather?")
    assert result.output == Weather(**PARIS)
    assert result.messages[1].text == "(empty reply)"
