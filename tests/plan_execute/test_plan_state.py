"""Saved Plan-and-Execute state: written and read back through one model, every field checked."""

from __future__ import annotations

from typing import Any

import pytest

from agentloops import CheckpointError, MemoryCheckpointer, PlanAndExecute
from agentloops.plan_execute.result import RunState
from agentloops.testing import ScriptedModel, respond_structured

PLAN = {
    "steps": [
        {"step_number": 1, "description": "first"},
        {"step_number": 2, "description": "second"},
    ]
}


def saved_run() -> tuple[PlanAndExecute, MemoryCheckpointer, dict[str, Any]]:
    """A run paused by a crash after step 1: step 2 still pending."""
    store = MemoryCheckpointer()
    model = ScriptedModel([respond_structured(PLAN), "one", RuntimeError("model down")])
    agent = PlanAndExecute(model, checkpointer=store)
    with pytest.raises(RuntimeError):
        agent.run("t", run_id="r")
    state = store.load("r")
    assert state is not None and [s["status"] for s in state["steps"]] == ["done", "pending"]
    return agent, store, state


def test_a_saved_state_reads_back_as_it_was_written():
    _, _, state = saved_run()
    assert RunState.from_dict("r", state).to_dict() == state


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda s: s["steps"][1].update(status="bogus"),
            "steps.1.status: Input should be 'pending', 'done', 'incomplete' or 'paused' "
            "(got 'bogus')",
        ),
        (
            lambda s: s["steps"][0]["usage"].update(input_tokens="12"),
            "steps.0.usage.input_tokens: Input should be a valid integer (got '12')",
        ),
        (lambda s: s.update(model_calls=None), "model_calls: Input should be a valid integer"),
        (lambda s: s.pop("task"), "task: Field required"),
        (lambda s: s.update(surprise=1), "surprise: Extra inputs are not permitted"),
        (
            lambda s: s["plan"]["steps"][0].update(step_number="one"),
            "plan.steps.0.step_number: Input should be a valid integer",
        ),
        (lambda s: s.update(paused=["not", "a", "state"]), "paused: Input should be an object"),
    ],
    ids=["status", "usage", "count", "missing", "extra", "plan", "paused"],
)
def test_a_damaged_field_is_refused_and_named(change, message):
    agent, store, state = saved_run()
    change(state)
    store.save("r", state)
    with pytest.raises(CheckpointError) as info:
        agent.resume("r")
    assert str(info.value).startswith("run 'r': the saved state is malformed: ")
    assert message in str(info.value)
    assert info.value.run_id == "r"


def test_a_state_that_is_not_a_dict_is_not_a_plan_and_execute_run():
    with pytest.raises(CheckpointError, match="not a Plan-and-Execute run"):
        RunState.from_dict("r", ["a", "list"])  # type: ignore[arg-type]
