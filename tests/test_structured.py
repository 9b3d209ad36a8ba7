import pydantic
import pytest

from agentloops import (
    ConfigurationError,
    Message,
    ModelOutputError,
    ModelResponse,
    Text,
    ToolCall,
    Usage,
    ask_structured,
    output_schema,
)
from agentloops.testing import ScriptedModel, respond, respond_structured


class City(pydantic.BaseModel):
    name: str
    population: int


U = Usage(input_tokens=10, output_tokens=5)


def test_native_output_validates_first_time():
    model = ScriptedModel([respond_structured({"name": "Oslo", "population": 700000}, usage=U)])
    reply = ask_structured(model, City, "Biggest city in Norway?", system="be terse")
    assert reply.value == City(name="Oslo", population=700000)
    assert (reply.model_calls, reply.usage) == (1, U)
    request = model.requests[0]
    assert request.output == output_schema(City)
    assert request.tools == [] and request.system == "be terse"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Oslo", "population": 1}',
        '```json\n{"name": "Oslo", "population": 1}\n```',
        'Here you go: {"name": "Oslo", "population": 1} hope it helps',
    ],
)
def test_json_in_text_is_accepted(text):
    reply = ask_structured(ScriptedModel([text]), City, "q")
    assert reply.value.name == "Oslo"


def test_invalid_output_is_sent_back_with_errors_then_accepted():
    model = ScriptedModel(
        [
            respond_structured({"name": "Oslo"}, usage=U),
            respond_structured({"name": "Oslo", "population": 5}, usage=U),
        ]
    )
    reply = ask_structured(model, City, "q")
    assert reply.value.population == 5
    assert reply.model_calls == 2 and reply.usage == U + U
    retry = model.requests[1].messages
    assert [m.role for m in retry] == ["user", "assistant", "user"]
    assert "population: Field required" in retry[-1].text


def test_gives_up_after_max_retries_with_the_last_raw_output():
    model = ScriptedModel(["not json", "still not", '{"name": 3}'])
    with pytest.raises(ModelOutputError) as info:
        ask_structured(model, City, "q", max_retries=2)
    err = info.value
    assert err.raw == '{"name": 3}'
    assert "population" in err.errors and err.model_calls == 3
    model.assert_complete()


def test_refusal_counts_as_invalid_output():
    model = ScriptedModel([respond("no", stop_reason="refusal"), '{"name": "a", "population": 1}'])
    assert ask_structured(model, City, "q").model_calls == 2


def test_tool_call_replies_are_answered_so_the_retry_stays_valid():
    odd = ModelResponse(Message("assistant", (Text("hmm"), ToolCall("t1", "x", {}))), "tool_use")
    model = ScriptedModel([odd, '{"name": "a", "population": 1}'])
    ask_structured(model, City, [Message.user("q")])
    results = model.requests[1].messages[-1].tool_results
    assert [r.call_id for r in results] == ["t1"] and results[0].is_error


def test_events_are_emitted_for_each_call():
    events = []
    model = ScriptedModel(["nope", '{"name": "a", "population": 1}'])
    ask_structured(model, City, "q", on_event=events.append, loop="router", run_id="r1")
    names = [type(e).__name__ for e in events]
    assert names == ["ModelCallStarted", "ModelCallFinished"] * 2
    assert {e.loop for e in events} == {"router"} and {e.run_id for e in events} == {"r1"}


def test_negative_retries_is_a_configuration_error():
    with pytest.raises(ConfigurationError):
        ask_structured(ScriptedModel([]), City, "q", max_retries=-1)


@pytest.mark.parametrize("blank", ["", "   \n"])
def test_a_blank_reply_is_retried_with_a_valid_transcript(blank):
    model = ScriptedModel([blank, '{"name": "a", "population": 1}'])
    assert ask_structured(model, City, "q").value.name == "a"
    assert model.requests[1].messages[1].text == "(empty reply)"


def test_an_unclosed_object_is_reported_as_no_json():
    model = ScriptedModel(["Here: {", '{"name": "a", "population": 1}'])
    ask_structured(model, City, "q")
    assert "the reply held no JSON" in model.requests[1].messages[-1].text


class Numbers(pydantic.BaseModel):
    values: list[int]


def test_the_errors_sent_back_are_cut_however_many_there_are():
    from agentloops.structured import MAX_ERRORS_CHARS

    bad = '{"values": [' + ", ".join(['"x"'] * 5000) + "]}"
    model = ScriptedModel([bad, '{"values": [1]}'])
    assert ask_structured(model, Numbers, "q").value.values == [1]
    feedback = model.requests[1].messages[-1].text
    assert "values.0: Input should be a valid integer" in feedback
    assert "characters of errors cut" in feedback and "values.4999" in feedback  # head, tail
    assert len(feedback) < MAX_ERRORS_CHARS + 300
