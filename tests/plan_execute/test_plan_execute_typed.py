"""A typed Plan-and-Execute run: the reporter fills `output_type`; the steps still answer in
text; a resume replays the run's journal (its store, or its checkpointer) and returns the same
output. Both drivers."""

from __future__ import annotations

import pydantic
import pytest

from agentloops import (
    CheckpointError,
    MemoryCheckpointer,
    ModelRetry,
    OutputContext,
    Price,
    Usage,
    tool,
)
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools


class Verdict(pydantic.BaseModel):
    warmer: str
    reasons: list[str]


@tool
def weather(city: str) -> str:
    """The weather now in a city."""
    return {"Rome": "24C", "Oslo": "9C"}[city]


PLAN = {"steps": [{"step_number": 1, "description": "weather in Rome"}]}
ANSWER = {"warmer": "Rome", "reasons": ["24C against 9C"]}


def script(*answers: object) -> list[object]:
    return [respond_structured(PLAN), use_tools(("weather", {"city": "Rome"})), "24C", *answers]


def test_the_reporter_fills_the_output_type(PlanAndExecute) -> None:
    model = ScriptedModel(script(respond_structured(ANSWER)))
    result = PlanAndExecute(model, [weather], output_type=Verdict).run("Warmer?")
    assert (result.stop_reason, result.output) == ("answered", Verdict(**ANSWER))
    assert Verdict.model_validate_json(result.answer) == result.output
    assert result.step_results == ["24C"]
    step_request, reporter = model.requests[1], model.requests[3]
    assert step_request.output is None  # a step answers in text
    assert reporter.output is not None and reporter.output.name == "Verdict"
    assert "Step 1 [done]" in reporter.messages[0].text


def test_the_validator_retries_the_reporter(PlanAndExecute) -> None:
    contexts: list[OutputContext] = []

    def cites(out: Verdict, context: OutputContext) -> Verdict:
        contexts.append(context)
        if not out.reasons:
            raise ModelRetry("give a reason")
        return out

    one = Usage(input_tokens=1)
    model = ScriptedModel(
        [
            respond_structured(PLAN, usage=one),
            use_tools(("weather", {"city": "Rome"}), usage=one),
            respond("24C", usage=one),
            respond_structured({"warmer": "Rome", "reasons": []}, usage=one),
            respond_structured(ANSWER, usage=one),
        ]
    )
    agent = PlanAndExecute(model, [weather], output_type=Verdict, output_validator=cites)
    result = agent.run("Warmer?", run_id="pe")
    assert result.output == Verdict(**ANSWER) and result.model_calls == 5
    assert "give a reason" in model.requests[4].messages[-1].text
    assert [(c.loop, c.run_id, c.retries) for c in contexts] == [
        ("plan_execute", "pe", 0),
        ("plan_execute", "pe", 1),
    ]
    # what the run spent so far: planner 1 + step 2 + this answer 1 (each says 1 token)
    assert [c.usage.input_tokens for c in contexts] == [4, 5]


def test_past_the_retries_the_run_stops_invalid_output(PlanAndExecute) -> None:
    model = ScriptedModel(script(respond_structured({}), respond_structured({})))
    agent = PlanAndExecute(model, [weather], output_type=Verdict, max_output_retries=1)
    result = agent.run("Warmer?")
    assert (result.stop_reason, result.output) == ("invalid_output", None)
    assert "warmer: Field required" in result.detail
    assert result.step_results == ["24C"]


def test_a_typed_run_on_a_checkpointer_resumes_with_the_same_output(PlanAndExecute):
    checkpoints = MemoryCheckpointer()  # the run store, under its older name
    model = ScriptedModel(script(respond_structured(ANSWER)))
    agent = PlanAndExecute(model, [weather], output_type=Verdict, checkpointer=checkpoints)
    agent.run("Warmer?", run_id="kept")
    replies = [r.data["response"] for r in checkpoints.read("kept") if r.kind == "model"]
    assert replies[-1]["output"] == ANSWER  # the journal holds the reporter's reply
    again = PlanAndExecute(
        ScriptedModel([]), [weather], output_type=Verdict, checkpointer=checkpoints
    )
    assert again.resume("kept").output == Verdict(**ANSWER)  # no model call
    assert again.status("kept").output == Verdict(**ANSWER)
    for other in ({}, {"output_type": int}, {"output_type": Verdict, "max_output_retries": 5}):
        changed = PlanAndExecute(ScriptedModel([]), [weather], checkpointer=checkpoints, **other)
        with pytest.raises(CheckpointError, match="does not match this loop") as refused:
            changed.status("kept")  # the journal's replies would be judged otherwise
        assert refused.value.field == "fingerprint"
        with pytest.raises(CheckpointError, match=r"allow_changes=.*output"):
            changed.resume("kept")


def test_an_untyped_run_has_no_output(PlanAndExecute) -> None:
    model = ScriptedModel(
        [
            respond_structured(PLAN),
            use_tools(("weather", {"city": "Rome"})),
            "24C",
            "Rome is warmer.",
        ]
    )
    result = PlanAndExecute(model, [weather]).run("Warmer?")
    assert (result.answer, result.output) == ("Rome is warmer.", None)
    assert model.requests[-1].output is None


def test_a_typed_reporter_is_priced_as_the_reporter(PlanAndExecute) -> None:
    spent = Usage(input_tokens=1_000_000)
    model = ScriptedModel(
        [
            respond_structured(PLAN, usage=spent),
            use_tools(("weather", {"city": "Rome"})),
            "24C",
            respond_structured({}, usage=spent),  # rejected: still the reporter's
            respond_structured(ANSWER, usage=spent),
        ]
    )
    agent = PlanAndExecute(model, [weather], output_type=Verdict, price=Price(input=1, output=1))
    result = agent.run("Warmer?")
    assert result.output == Verdict(**ANSWER)
    assert result.cost_by_role["planner"] == 1 and result.cost_by_role["reporter"] == 2
