"""A typed run on a run store: the output validator's verdicts and a tool's `ModelRetry`
are journaled like any outcome, so a resume (or a status read) replays them and returns the
same `result.output` without asking the validator again. (SIGKILL at every effect boundary:
tests/engine/test_durable_faults.py, its "typed" run.)"""

from __future__ import annotations

import pydantic
import pytest

from agentloops import (
    MemoryStore,
    ModelError,
    ModelRetry,
    OutputContext,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    tool,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools


class Answer(pydantic.BaseModel):
    value: int


CHECKS: list[int] = []


def positive(out: Answer, context: OutputContext) -> Answer:
    CHECKS.append(out.value)
    if out.value <= 0:
        raise ModelRetry("the value must be positive")
    return out.model_copy(update={"value": out.value * 10})  # a changed output is journaled


@tool(retries=0)
def picky(x: int) -> str:
    """Never happy."""
    raise ModelRetry("not this x")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CHECKS.clear()


def test_a_resumed_typed_react_run_replays_the_validator_and_the_retry() -> None:
    store = MemoryStore()
    script = [
        use_tools(("picky", {"x": 1})),
        respond_structured({"value": 0}),
        ModelError("the provider fell over"),
    ]
    loop = ReActLoop(
        ScriptedModel(script), [picky], output_type=Answer, output_validator=positive, store=store
    )
    with pytest.raises(ModelError):
        loop.run("q", run_id="typed-1")
    assert CHECKS == [0]
    kinds = [r.kind for r in store.read("typed-1")]
    assert kinds.count("output_checked") == 1
    retried = next(r for r in store.read("typed-1") if r.kind == "tool_finished")
    assert retried.data["outcome"]["retry"] is True

    again = ReActLoop(
        ScriptedModel([respond_structured({"value": 4})]),
        [picky],
        output_type=Answer,
        output_validator=positive,
        store=store,
    )
    result = again.resume("typed-1")
    assert CHECKS == [0, 4]  # the first verdict came from the journal
    assert result.output == Answer(value=40)
    spent = result.messages[2].tool_results[0].content
    assert "retries are spent (retries=0)" in spent  # the count replayed, from the journal
    assert again.status("typed-1").output == Answer(value=40)
    assert CHECKS == [0, 4]


@pytest.mark.parametrize("kind", ["rewoo", "plan_execute"])
def test_a_finished_typed_run_reads_back_the_same_output(kind: str) -> None:
    store = MemoryStore()

    @tool
    def one() -> int:
        """One."""
        return 1

    if kind == "rewoo":
        plan = {
            "steps": [{"step_id": "#E1", "description": "1", "tool_name": "one", "tool_args": {}}]
        }
        loop: ReWOOPipeline | PlanAndExecute = ReWOOPipeline(
            ScriptedModel([respond_structured(plan), respond_structured({"value": 2})]),
            [one],
            output_type=Answer,
            output_validator=positive,
            store=store,
        )
    else:
        plan = {"steps": [{"step_number": 1, "description": "one"}]}
        loop = PlanAndExecute(
            ScriptedModel(
                [
                    respond_structured(plan),
                    use_tools(("one", {})),
                    "1",
                    respond_structured({"value": 2}),
                ]
            ),
            [one],
            output_type=Answer,
            output_validator=positive,
            store=store,
        )
    result = loop.run("q", run_id=f"{kind}-1")
    assert result.output == Answer(value=20) and CHECKS == [2]
    assert loop.status(f"{kind}-1").output == Answer(value=20)
    assert loop.resume(f"{kind}-1").output == Answer(value=20)
    assert CHECKS == [2]  # neither the status nor the resume asked it again
