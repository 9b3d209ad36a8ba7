"""A typed ReWOO run: the solver fills `output_type`, its answer checked like a ReAct one
(validation errors and the validator's `ModelRetry` sent back, `max_output_retries`), under
both drivers."""

from __future__ import annotations

from decimal import Decimal

import pydantic
import pytest

from agentloops import InvalidOutput, ModelRetry, OutputContext, Price, Usage, tool
from agentloops.rewoo import SOLVER_SYSTEM, TYPED_SOLVER_SYSTEM
from agentloops.testing import ScriptedModel, respond, respond_structured


class Warmer(pydantic.BaseModel):
    city: str
    by_degrees: int


@tool
def weather(city: str) -> str:
    """The weather now in a city."""
    return {"Rome": "24C", "Oslo": "9C"}[city]


PLAN = {
    "steps": [
        {
            "step_id": "#E1",
            "description": "Rome",
            "tool_name": "weather",
            "tool_args": {"city": "Rome"},
        },
        {
            "step_id": "#E2",
            "description": "Oslo",
            "tool_name": "weather",
            "tool_args": {"city": "Oslo"},
        },
    ]
}
ROME = {"city": "Rome", "by_degrees": 15}


def test_the_solver_fills_the_output_type(ReWOOPipeline) -> None:
    model = ScriptedModel([respond_structured(PLAN), respond_structured(ROME)])
    result = ReWOOPipeline(model, [weather], output_type=Warmer).run("Which is warmer?")
    assert (result.stop_reason, result.output) == ("answered", Warmer(**ROME))
    assert Warmer.model_validate_json(result.answer) == result.output
    solver = model.requests[1]
    assert solver.output is not None and solver.output.name == "Warmer"
    assert solver.system == TYPED_SOLVER_SYSTEM != SOLVER_SYSTEM
    assert "plain text" not in solver.system
    assert "24C" in solver.messages[0].text  # the evidence, as for any solver
    assert result.model_calls == 2


def test_an_invalid_answer_is_sent_back_then_accepted(ReWOOPipeline) -> None:
    model = ScriptedModel(
        [respond_structured(PLAN), respond_structured({"city": "Rome"}), respond_structured(ROME)]
    )
    result = ReWOOPipeline(model, [weather], output_type=Warmer).run("Which is warmer?")
    assert result.output == Warmer(**ROME) and result.model_calls == 3
    assert "by_degrees: Field required" in model.requests[2].messages[-1].text


def test_the_validator_sees_the_solver_transcript_and_may_retry(ReWOOPipeline) -> None:
    contexts: list[OutputContext] = []

    def difference(out: Warmer, context: OutputContext) -> Warmer:
        contexts.append(context)
        if out.by_degrees != 15:
            raise ModelRetry("24 - 9 is 15")
        return out

    script = [
        respond_structured(PLAN),
        respond_structured({**ROME, "by_degrees": 14}),
        respond_structured(ROME),
    ]
    model = ScriptedModel(script)
    pipeline = ReWOOPipeline(model, [weather], output_type=Warmer, output_validator=difference)
    result = pipeline.run("Which is warmer?", run_id="rw")
    assert result.output == Warmer(**ROME)
    assert "24 - 9 is 15" in model.requests[2].messages[-1].text
    assert [c.retries for c in contexts] == [0, 1]
    assert {c.loop for c in contexts} == {"rewoo"} and contexts[0].run_id == "rw"
    assert "24C" in contexts[0].messages[0].text


def test_past_the_retries_the_run_stops_invalid_output(ReWOOPipeline) -> None:
    script = [respond_structured(PLAN), respond_structured({}), respond_structured({})]
    model = ScriptedModel(script)
    pipeline = ReWOOPipeline(model, [weather], output_type=Warmer, max_output_retries=1)
    result = pipeline.run("Which is warmer?")
    assert (result.stop_reason, result.output, result.answer) == ("invalid_output", None, "")
    assert "max_output_retries=1" in result.detail and "city: Field required" in result.detail
    assert result.model_calls == 3 and set(result.evidence) == {"#E1", "#E2"}  # nothing lost
    with pytest.raises(InvalidOutput):
        result.raise_for_stop()


def test_a_refusal_stops_the_run_refused(ReWOOPipeline) -> None:
    model = ScriptedModel([respond_structured(PLAN), respond("No.", stop_reason="refusal")])
    result = ReWOOPipeline(model, [weather], output_type=Warmer).run("Which is warmer?")
    assert (result.stop_reason, result.output, result.detail) == (
        "refused",
        None,
        "model stop_reason=refusal",
    )


def test_your_own_solver_prompt_stays_yours(ReWOOPipeline) -> None:
    model = ScriptedModel([respond_structured(PLAN), respond_structured(ROME)])
    ReWOOPipeline(model, [weather], output_type=Warmer, solver_system="Mine.").run("q")
    assert model.requests[1].system == "Mine."


def test_a_typed_solver_is_priced_as_the_solver(ReWOOPipeline) -> None:
    spent = Usage(input_tokens=1_000_000)
    model = ScriptedModel(
        [
            respond_structured(PLAN, usage=spent),
            respond_structured({"city": "Rome"}, usage=spent),  # rejected: still the solver's
            respond_structured(ROME, usage=spent),
        ]
    )
    pipeline = ReWOOPipeline(model, [weather], output_type=Warmer, price=Price(input=1, output=1))
    result = pipeline.run("Which is warmer?")
    assert result.output == Warmer(**ROME)
    assert result.cost_by_role == {"planner": Decimal(1), "solver": Decimal(2)}
