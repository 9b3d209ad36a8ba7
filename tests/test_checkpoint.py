"""Checkpointers are the run store under older names: what old code gives `checkpointer=`
gets leases and exactly-once, and an object of the old save/load/delete protocol is refused
with what to give instead. (The stores' own behaviour is in tests/journal/; two processes
racing on one run over a `SQLiteCheckpointer` are in tests/plan_execute/.)"""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    Checkpointer,
    ConfigurationError,
    MemoryCheckpointer,
    MemoryStore,
    ModelRequest,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    RunLeased,
    RunStore,
    SQLiteCheckpointer,
    SQLiteStore,
    tool,
)
from agentloops.testing import FunctionModel, ScriptedModel, respond_structured, use_tools


def test_the_names_are_the_run_store_and_its_protocol(tmp_path: Path) -> None:
    assert Checkpointer is RunStore
    assert MemoryCheckpointer is MemoryStore and SQLiteCheckpointer is SQLiteStore
    store = SQLiteCheckpointer(tmp_path / "runs.db", timeout=5.0)  # the old signature
    assert isinstance(store, Checkpointer) and isinstance(MemoryCheckpointer(), Checkpointer)
    assert (store.timeout, store.synchronous) == (5.0, "FULL")
    copy = pickle.loads(pickle.dumps(store))  # for process pools and Dask, as before
    assert copy.path == store.path and copy.timeout == 5.0


def test_checkpointer_is_another_spelling_of_store(tmp_path: Path) -> None:
    plan = {"steps": [{"step_number": 1, "description": "answer"}]}
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    agent = PlanAndExecute(
        ScriptedModel([respond_structured(plan), "42", "It is 42."]), checkpointer=store
    )
    assert agent.store is store
    assert agent.run("What?", run_id="r").answer == "It is 42."
    info = store.run_info("r")  # journaled, as with store=
    assert (info.kind, info.status, info.meta["task"]) == ("plan_execute", "finished", "What?")
    assert [r.kind for r in store.read("r") if r.kind != "event"] == ["model"] * 3 + ["result"]
    with pytest.raises(ConfigurationError, match="not both"):
        PlanAndExecute(ScriptedModel([]), store=store, checkpointer=store)


class OldCheckpointer:
    """The protocol checkpointers had: one whole state per run, no lease."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, Any]] = {}

    def save(self, run_id: str, state: dict[str, Any]) -> None:
        self.states[run_id] = state

    def load(self, run_id: str) -> dict[str, Any] | None:
        return self.states.get(run_id)

    def delete(self, run_id: str) -> None:
        self.states.pop(run_id, None)


def test_an_object_of_the_old_protocol_is_refused_saying_how_to_move() -> None:
    with pytest.raises(ConfigurationError) as caught:
        PlanAndExecute(ScriptedModel([]), checkpointer=OldCheckpointer())  # type: ignore[arg-type]
    said = str(caught.value)
    assert "checkpointer= takes a RunStore" in said
    assert "OldCheckpointer has only save/load/delete" in said
    assert "SQLiteCheckpointer(path)" in said and "docs/checkpoints.md" in said


@pytest.mark.parametrize("loop", [ReActLoop, ReWOOPipeline, PlanAndExecute])
@pytest.mark.parametrize("given", [OldCheckpointer(), "runs.db", object()], ids=repr)
def test_store_takes_a_run_store_and_nothing_else(loop: Any, given: object) -> None:
    with pytest.raises(ConfigurationError, match="store= takes a RunStore") as caught:
        loop(ScriptedModel([]), [], store=given)
    assert type(given).__name__ in str(caught.value)


@tool(read_only=False, requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return "paid"


PAID: list[int] = []


def test_two_loops_in_one_process_over_one_checkpointer_take_turns() -> None:
    """Old code sharing a `MemoryCheckpointer` between threads: while one loop drives the
    run, the other is refused; the approved payment is made once."""
    PAID.clear()
    store = MemoryCheckpointer()
    plan = {"steps": [{"step_number": 1, "description": "pay 7"}]}
    first = ScriptedModel([respond_structured(plan), use_tools(("pay", {"amount": 7}))])
    paused = PlanAndExecute(first, [pay], checkpointer=store).run("Pay 7.", run_id="r")
    decisions = {paused.pending_approvals[0].id: True}
    inside, leave = threading.Event(), threading.Event()

    def answer(request: ModelRequest) -> str:
        if inside.is_set():
            return "Paid 7."  # the reporter
        inside.set()  # the step goes on after the payment, under the run's lease
        assert leave.wait(10)
        return "paid 7"

    driver = PlanAndExecute(FunctionModel(answer), [pay], checkpointer=store)
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(driver.resume("r", decisions)))
    thread.start()
    assert inside.wait(10)
    with pytest.raises(RunLeased):
        PlanAndExecute(ScriptedModel([]), [pay], checkpointer=store).resume("r", decisions)
    leave.set()
    thread.join(10)
    assert done[0].answer == "Paid 7." and PAID == [7]
