"""`loop.fork(run_id, at=seq, new_run_id=, replace=)` on the three loops: the fork's journal
is the source's up to `at` (record `at` replaced when asked), its run ids rewritten, then it
goes on live; nothing on record runs again; the source is untouched and still replays."""

from __future__ import annotations

from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    MemoryStore,
    RunExists,
    RunNotFound,
    ToolCall,
    ToolOutcome,
    tool,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools

RAN: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


@tool
def look(key: str) -> str:
    """Look a key up."""
    RAN.append(("look", key))
    return key.upper()


@tool(read_only=False, requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    RAN.append(("refund", order))
    return f"refunded {order}"


def seq_of(store: MemoryStore, run_id: str, kind: str, n: int = 0) -> int:
    return [r.seq for r in store.read(run_id) if r.kind == kind][n]


def snapshot(store: MemoryStore, run_id: str) -> list[tuple[int, str, Any, Any]]:
    return [(r.seq, r.kind, r.key, r.data) for r in store.read(run_id)]


def test_a_fork_with_another_model_answer_diverges_from_at_and_the_source_replays_unchanged(
    ReActLoop: Any,
) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "It is A."])
    source = ReActLoop(model, [look], store=store).run("Look.", run_id="r1")
    before = snapshot(store, "r1")
    first_answer = seq_of(store, "r1", "model")

    fork_model = ScriptedModel(["It is B."])
    loop = ReActLoop(fork_model, [look], store=store)
    other = use_tools(ToolCall("b1", "look", {"key": "b"}))
    forked = loop.fork("r1", at=first_answer, new_run_id="f1", replace=other)
    assert forked.answer == "It is B." and RAN == [("look", "a"), ("look", "b")]
    assert forked.run_id == "f1" and fork_model.calls == 1  # the replaced answer: no call

    assert snapshot(store, "r1") == before  # the source untouched
    again = ReActLoop(ScriptedModel([]), [look], store=store).resume("r1")
    assert again.answer == source.answer and len(RAN) == 2  # and it replays unchanged
    info = store.run_info("f1")
    assert info.meta["forked_from"] == {"run_id": "r1", "at": first_answer, "replaced": True}
    assert info.meta["task"] == "Look." and info.status == "finished"
    records = store.read("f1")
    assert records[0].data["replaced"] is True and records[0].data["run"] == "f1"
    [started] = [r for r in records if r.kind == "tool_started"]
    assert started.key == "f1:b1"  # the fork's own call, under its own key
    # re-chained: each copied record sealed into the fork's own checksum chain, so the
    # fork reads back as a journal of its own (a resume checks every record)
    assert all("sum" in r.data for r in records)
    assert {r.data["sum"] for r in records}.isdisjoint(r.data["sum"] for r in store.read("r1"))
    assert ReActLoop(ScriptedModel([]), [look], store=store).resume("f1").answer == "It is B."
    assert info.meta["nonce"] != store.run_info("r1").meta["nonce"]


def test_a_fork_without_replace_goes_on_live_from_a_tool_result_running_nothing_again(
    ReActLoop: Any,
) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "It is A."])
    ReActLoop(model, [look], store=store).run("Look.", run_id="r1")
    at = seq_of(store, "r1", "tool_finished")
    fork_model = ScriptedModel(["A, as looked up."])
    forked = ReActLoop(fork_model, [look], store=store).fork("r1", at=at)
    assert forked.answer == "A, as looked up." and RAN == [("look", "a")]
    assert forked.run_id != "r1" and store.run_info(forked.run_id).meta["forked_from"]["at"] == at
    copied = store.read(forked.run_id)[:at]
    assert [r.kind for r in copied] == ["model", "tool_started", "tool_finished"]
    assert copied[1].key == copied[2].key and copied[1].key.startswith(f"{forked.run_id}:")


def test_a_fork_with_another_tool_result(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "It is A."])
    ReActLoop(model, [look], store=store).run("Look.", run_id="r1")
    at = seq_of(store, "r1", "tool_finished")
    seen: list[str] = []

    def answer(request: Any) -> Any:
        seen.append(request.messages[-1].content[0].content)
        return "It was Z."

    from agentloops.testing import FunctionModel

    forked = ReActLoop(FunctionModel(answer), [look], store=store).fork(
        "r1", at=at, new_run_id="f1", replace="Z"
    )
    assert forked.answer == "It was Z." and seen == ["Z"] and RAN == [("look", "a")]
    bad = ToolOutcome(content="no such key", is_error=True)
    errored = ReActLoop(ScriptedModel(["Failed."]), [look], store=store).fork(
        "r1", at=at, new_run_id="f2", replace=bad
    )
    assert errored.messages[2].tool_results[0].is_error


def test_a_fork_with_another_decision_denies_what_the_source_approved(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(ToolCall("c1", "refund", {"order": "A-1"}))])
    loop = ReActLoop(model, [refund], store=store)
    assert loop.run("Refund.", run_id="r1").stop_reason == "approval_required"
    ReActLoop(ScriptedModel(["Refunded."]), [refund], store=store).resume("r1", {"c1": True})
    assert RAN == [("refund", "A-1")]
    at = seq_of(store, "r1", "decision")
    denied = ReActLoop(ScriptedModel(["Not refunded."]), [refund], store=store).fork(
        "r1", at=at, new_run_id="f1", replace="deny"
    )
    assert denied.answer == "Not refunded." and RAN == [("refund", "A-1")]  # not run again
    [decision] = [r for r in store.read("f1") if r.kind == "decision"]
    assert decision.data["approved"] is False and decision.key == "f1:c1"
    with pytest.raises(ConfigurationError, match="it takes True/'approve' or False/'deny'"):
        ReActLoop(ScriptedModel([]), [refund], store=store).fork(
            "r1", at=at, new_run_id="f2", replace="rerun"
        )
    # forking before the decision: the fork waits for its own
    asked = seq_of(store, "r1", "approval_requested")
    paused = ReActLoop(ScriptedModel([]), [refund], store=store).fork("r1", at=asked)
    assert paused.stop_reason == "approval_required" and paused.pending_approvals[0].id == "c1"


def test_a_call_not_finished_by_at_runs_live_in_the_fork(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "It is A."])
    ReActLoop(model, [look], store=store).run("Look.", run_id="r1")
    started = seq_of(store, "r1", "tool_started")
    forked = ReActLoop(ScriptedModel(["A again."]), [look], store=store).fork("r1", at=started)
    assert forked.answer == "A again." and RAN == [("look", "a"), ("look", "a")]
    keys = [r.key for r in store.read(forked.run_id) if r.kind == "tool_started"]
    assert len(keys) == 1 and keys[0].startswith(f"{forked.run_id}:")  # none left in doubt


def test_bad_forks_are_refused_before_anything_is_written(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "It is A."])
    ReActLoop(model, [look], store=store).run("Look.", run_id="r1")
    loop = ReActLoop(ScriptedModel([]), [look], store=store)
    for at in (0, 99, True, "1"):
        with pytest.raises(
            ConfigurationError, match=r"at must be the seq of a record of run 'r1' \(1\.\.5\), got"
        ):
            loop.fork("r1", at=at, new_run_id="f")  # type: ignore[arg-type]
    started = seq_of(store, "r1", "tool_started")
    with pytest.raises(ConfigurationError, match="a 'tool_started' record, not an outcome"):
        loop.fork("r1", at=started, new_run_id="f", replace="x")
    with pytest.raises(ConfigurationError, match="takes a ModelResponse or text, not bool"):
        loop.fork("r1", at=1, new_run_id="f", replace=True)
    with pytest.raises(RunNotFound):
        loop.fork("nope", at=1, new_run_id="f")
    assert [i.run_id for i in store.list_runs()] == ["r1"]
    with pytest.raises(RunExists):
        loop.fork("r1", at=1, new_run_id="r1")
    with pytest.raises(ConfigurationError, match="forking a run"):
        ReActLoop(ScriptedModel([]), [look]).fork("r1", at=1)


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "look", "tool_args": {"key": "a"}},
        {"step_id": "#E2", "description": "b", "tool_name": "look", "tool_args": {"key": "#E1!"}},
    ]
}


def test_a_rewoo_fork_with_another_result_for_a_step(ReWOOPipeline: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel([respond_structured(PLAN), "A and A!"])
    ReWOOPipeline(model, [look], store=store).run("q", run_id="w1")
    first = next(
        r.seq for r in store.read("w1") if r.kind == "tool_finished" and r.key.endswith("#E1")
    )
    RAN.clear()
    forked = ReWOOPipeline(ScriptedModel(["Z and Z!"]), [look], store=store).fork(
        "w1", at=first, new_run_id="w2", replace="z"
    )
    assert forked.answer == "Z and Z!" and RAN == [("look", "z!")]  # #E2 ran with the new #E1
    assert forked.evidence["#E1"].content == "z" and forked.evidence["#E2"].content == "Z!"
    again = ReWOOPipeline(ScriptedModel([]), [look], store=store).resume("w1")
    assert again.answer == "A and A!" and RAN == [("look", "z!")]


def test_a_plan_and_execute_fork_with_another_step_answer(PlanAndExecute: Any) -> None:
    store = MemoryStore()
    plan = {
        "steps": [{"step_number": 1, "description": "a"}, {"step_number": 2, "description": "b"}]
    }
    model = ScriptedModel([respond_structured(plan), "found a", "found b", "report"])
    PlanAndExecute(model, [look], store=store).run("t", run_id="p1")
    step2 = next(r.seq for r in store.read("p1") if r.kind == "model" and r.data["run"] == "p1.2")
    forked = PlanAndExecute(ScriptedModel(["report 2"]), [look], store=store).fork(
        "p1", at=step2, new_run_id="p2", replace="found nothing"
    )
    assert forked.step_results == ["found a", "found nothing"] and forked.answer == "report 2"
    runs = {r.data.get("run") for r in store.read("p2") if r.kind == "model"}
    assert runs == {"p2", "p2.1", "p2.2"}
