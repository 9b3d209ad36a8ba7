"""A typed Plan-and-Execute run: the reporter fills `output_type`; the steps still answer in
text; a checkpoint keeps the output as its JSON and a resume rebuilds it. Both drivers."""

from __future__ import annotations

import pydantic
import pytest

from agentloops import (
    CheckpointError,
    MemoryCheckpointer,
    ModelRetry,
    OutputContext,
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


def test_a_typed_checkpoint_keeps_the_json_and_a_resume_rebuilds_the_output(PlanAndExecute):
    checkpoints = MemoryCheckpointer()
    model = ScriptedModel(script(respond_structured(ANSWER)))
    agent = PlanAndExecute(model, [weather], output_type=Verdict, checkpointer=checkpoints)
    agent.run("Warmer?", run_id="kept")
    assert checkpoints.load("kept")["output"] == ANSWER
    again = PlanAndExecute(
        ScriptedModel([]), [weather], output_type=Verdict, checkpointer=checkpoints
    )
    assert again.resume("kept").output == Verdict(**ANSWER)  # no model call
    assert again.status("kept").output == Verdict(**ANSWER)
    untyped = PlanAndExecute(ScriptedModel([]), [weather], checkpointer=checkpoints)
    assert untyped.status("kept").output == ANSWER  # without the type, its JSON


def test_a_saved_output_that_is_not_the_type_is_refused() -> None:
    from agentloops import PlanAndExecute

    checkpoints = MemoryCheckpointer()
    PlanAndExecute(
        ScriptedModel(script(respond_structured(ANSWER))),
        [weather],
        output_type=Verdict,
        checkpointer=checkpoints,
    ).run("Warmer?", run_id="x")
    other = PlanAndExecute(ScriptedModel([]), [weather], output_type=int, checkpointer=checkpoints)
    with pytest.raises(CheckpointError, match="saved output is not a int"):
        other.status("x")


def test_an_untyped_checkpoint_has_no_output_key() -> None:
    from agentloops import PlanAndExecute

    checkpoints = MemoryCheckpointer()
    model = ScriptedModel(
        [
            respond_structured(PLAN),
            use_tools(("weather", {"city": "Rome"})),
            "24C",
            "Rome is warmer.",
        ]
    )
    PlanAndExecute(model, [weather], checkpointer=checkpoints).run("Warmer?", run_id="plain")
    assert "output" not in checkpoints.load("plain")
