"""A typed run on a run store: the output validator's verdicts and a tool's `ModelRetry`
are journaled like any outcome, so a resume (or a status read) replays them and returns the
same `result.output` without asking the validator again. (SIGKILL at every effect boundary:
tests/engine/test_durable_faults.py, its "typed" run.)"""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from agentloops import (
    CheckpointError,
    MemoryStore,
    ModelError,
    ModelRetry,
    OutputContext,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    tool,
)
from agentloops.engine._records import check
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


class Other(pydantic.BaseModel):
    value: int
    unit: str


def test_a_resume_under_another_output_type_is_refused_unless_allowed() -> None:
    store = MemoryStore()
    script = [respond_structured({"value": "x"}), ModelError("the provider fell over")]
    loop = ReActLoop(ScriptedModel(script), [], output_type=Answer, store=store)
    with pytest.raises(ModelError):
        loop.run("q", run_id="typed-2")
    header = store.run_info("typed-2").meta["fingerprint"]
    assert header["output_type"]["name"] == "Answer" and header["max_output_retries"] == 2

    for other in ({"output_type": Other}, {"output_type": Answer, "max_output_retries": 4}, {}):
        changed = ReActLoop(ScriptedModel([]), [], store=store, **other)  # type: ignore[arg-type]
        with pytest.raises(CheckpointError, match="does not match this loop"):
            changed.resume("typed-2")

    allowed = ReActLoop(
        ScriptedModel([respond_structured({"value": 3, "unit": "C"})]),
        [],
        output_type=Other,
        store=store,
    )
    result = allowed.resume("typed-2", allow_changes=["output_type"])
    assert result.output == Other(value=3, unit="C")
    kinds = [r.kind for r in store.read("typed-2")]
    assert "settings_changed" in kinds


def test_an_untyped_run_keeps_no_output_type_in_its_fingerprint() -> None:
    store = MemoryStore()
    ReActLoop(ScriptedModel(["done"]), [], store=store).run("q", run_id="plain-1")
    header = store.run_info("plain-1").meta["fingerprint"]
    assert header["output_type"] is None


def test_a_typed_runs_records_are_checked_as_they_are_read() -> None:
    store = MemoryStore()
    script = [use_tools(("picky", {"x": 1})), respond_structured({"value": 0}), ModelError("x")]
    loop = ReActLoop(
        ScriptedModel(script), [picky], output_type=Answer, output_validator=positive, store=store
    )
    with pytest.raises(ModelError):
        loop.run("q", run_id="typed-3")
    records = {r.kind: r for r in store.read("typed-3")}
    for r in records.values():
        check(r)  # what a typed run writes is what its kinds' schemas say
    damaged = [
        (records["output_checked"], "retry", 5, "retry"),
        (records["output_checked"], "step", -1, "step"),
        (
            records["tool_finished"],
            "outcome",
            {"content": "", "is_error": True, "seconds": 0.0, "retry": "yes"},
            "outcome.retry",
        ),
    ]
    for record, name, value, field in damaged:
        bad = dataclasses.replace(record, data={**record.data, name: value})
        with pytest.raises(CheckpointError) as caught:
            check(bad)
        assert caught.value.field == field
