"""What a durable run waits for, and decisions kept apart by kind: approve/deny a call that
waits for approval, rerun/skip a call in doubt; `decide` records one from any process,
under the run's lease, and the next `resume(run_id)` applies it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    DecisionRefused,
    ReActLoop,
    RunLeased,
    RunNotFound,
    ToolCall,
    decide,
    idempotency_key,
    tool,
    waiting,
)
from agentloops.engine.session import waiting as waiting_in
from agentloops.testing import ScriptedModel, use_tools

LEDGER: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LEDGER.clear()


class Crash(BaseException):
    """Stands for the process dying during a call."""


@tool(read_only=False, requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    LEDGER.append(("refund", idempotency_key()))
    return f"refunded {order}"


@tool(name="refund", read_only=False, requires_approval=True)
def refund_and_die(order: str) -> str:
    """Refund an order, then the process dies before the outcome is recorded."""
    LEDGER.append(("refund", idempotency_key()))
    raise Crash


def key(store: Any, run_id: str, call: str) -> str:
    """The idempotency key of a call of the run: its journal key and the run's nonce."""
    return f"{run_id}:{call}@{store.run_info(run_id).meta['nonce']}"


def paused(store: Any, run_id: str = "r1", *calls: ToolCall) -> None:
    calls = calls or (ToolCall("c1", "refund", {"order": "A-1"}),)
    ReActLoop(ScriptedModel([use_tools(*calls)]), [refund], store=store).run("q", run_id=run_id)


def in_doubt(store: Any) -> None:
    """`r1`: its refund approved, started, and the process died during it."""
    paused(store)
    with pytest.raises(Crash):
        ReActLoop(ScriptedModel([]), [refund_and_die], store=store).resume("r1", {"c1": True})


def test_waiting_lists_calls_waiting_for_approval_with_their_choices(durable_store: Any) -> None:
    paused(
        durable_store,
        "r1",
        ToolCall("c1", "refund", {"order": "A"}),
        ToolCall("c2", "refund", {"order": "B"}),
    )
    found = waiting(durable_store, "r1")
    assert [(w.call_id, w.why, w.call.args, w.choices) for w in found] == [
        ("c1", "approval", {"order": "A"}, ("approve", "deny")),
        ("c2", "approval", {"order": "B"}, ("approve", "deny")),
    ]
    assert {w.key for w in found} == {"r1:c1", "r1:c2"} and found[0].run_id == "r1"
    assert durable_store.read("r1")[found[0].seq - 1].kind == "approval_requested"
    assert waiting_in(durable_store.read("r1"))["c1"][0] == "approval"  # the older form


def test_waiting_lists_a_call_in_doubt_and_nothing_for_a_finished_run(durable_store: Any) -> None:
    in_doubt(durable_store)
    [w] = waiting(durable_store, "r1")
    assert (w.call_id, w.why, w.choices, w.key) == ("c1", "doubt", ("rerun", "skip"), "r1:c1")
    assert durable_store.read("r1")[w.seq - 1].kind == "tool_started"
    ReActLoop(ScriptedModel(["Done."]), [refund], store=durable_store).resume("r1", {"c1": "skip"})
    assert waiting(durable_store, "r1") == []
    with pytest.raises(RunNotFound):
        waiting(durable_store, "nope")


def test_approving_everything_pending_never_reruns_a_crashed_refund(durable_store: Any) -> None:
    """The mix-up: a script approves every pending call, and one of them is a refund that
    already ran once and crashed. The approval is refused, saying what the call takes."""
    in_doubt(durable_store)
    everything = {w.call_id: True for w in waiting(durable_store, "r1")}
    loop = ReActLoop(ScriptedModel(["Done."]), [refund], store=durable_store)
    with pytest.raises(DecisionRefused) as info:
        loop.resume("r1", everything)
    message = str(info.value)
    assert "c1 (refund) of run 'r1' is in doubt" in message
    assert "it started and its outcome was never recorded" in message
    assert "say 'rerun'" in message and "'skip'" in message
    assert (info.value.run_id, info.value.call_id) == ("r1", "c1")
    with pytest.raises(DecisionRefused, match="in doubt"):
        decide(durable_store, "r1", "c1", "approve", by="script")
    assert [
        ("refund", key(durable_store, "r1", "c1"))
    ] == LEDGER  # it ran once, and nothing ran it again
    assert [r.kind for r in durable_store.read("r1")].count("doubt_decision") == 0


def test_a_rerun_for_a_call_waiting_for_approval_is_refused(durable_store: Any) -> None:
    paused(durable_store)
    loop = ReActLoop(ScriptedModel(["Done."]), [refund], store=durable_store)
    with pytest.raises(DecisionRefused, match=r"waits for approval: it has not run.*approve it"):
        loop.resume("r1", {"c1": "rerun"})
    with pytest.raises(DecisionRefused, match="waits for approval"):
        decide(durable_store, "r1", "c1", "skip", by="ann")
    assert LEDGER == [] and waiting(durable_store, "r1")[0].why == "approval"


@pytest.mark.parametrize("value", ["yes", 1, None, "APPROVE"])
def test_what_is_not_a_decision_is_refused(durable_store: Any, value: Any) -> None:
    paused(durable_store)
    with pytest.raises(ConfigurationError, match="a decision is True, False, 'approve'"):
        decide(durable_store, "r1", "c1", value, by="ann")


def test_decide_records_a_decision_that_the_next_resume_applies(durable_store: Any) -> None:
    paused(durable_store)
    record = decide(durable_store, "r1", "c1", "approve", by="ann", reason="customer called")
    assert record is not None and record.kind == "decision" and record.key == "r1:c1"
    assert "sum" in record.data  # sealed into the run's checksum chain
    assert {k: v for k, v in record.data.items() if k != "sum"} == {
        "approved": True,
        "name": "refund",
        "args": {"order": "A-1"},
        "by": "ann",
        "reason": "customer called",
    }
    info = durable_store.run_info("r1")
    assert info.status == "paused" and not info.leased  # decided, not yet resumed
    assert waiting(durable_store, "r1") == []
    result = ReActLoop(ScriptedModel(["Refunded."]), [refund], store=durable_store).resume("r1")
    assert result.answer == "Refunded." and [("refund", key(durable_store, "r1", "c1"))] == LEDGER


def test_decide_takes_the_same_decision_again_and_refuses_a_contradicting_one(
    durable_store: Any,
) -> None:
    paused(durable_store)
    assert decide(durable_store, "r1", "c1", True, by="ann") is not None
    assert decide(durable_store, "r1", "c1", "approve", by="bob") is None  # as given already
    with pytest.raises(DecisionRefused, match=r"already decided: approved by ann \(record \d+\)"):
        decide(durable_store, "r1", "c1", "deny", by="bob")
    with pytest.raises(DecisionRefused, match="so none applies to 'zz'"):
        decide(durable_store, "r1", "zz", "deny", by="bob")
    assert [r.kind for r in durable_store.read("r1")].count("decision") == 1


def test_decide_on_a_call_in_doubt(durable_store: Any) -> None:
    in_doubt(durable_store)
    assert durable_store.run_info("r1").status == "running"  # it died: nothing said otherwise
    record = decide(durable_store, "r1", "c1", "rerun", by="ops")
    assert record is not None and record.kind == "doubt_decision"
    assert record.data["choice"] == "rerun" and record.data["approved"] is True
    assert durable_store.run_info("r1").status == "running"  # decided; resumed by a driver
    with pytest.raises(DecisionRefused, match="already decided: to run again by ops"):
        decide(durable_store, "r1", "c1", "skip", by="ops")
    result = ReActLoop(ScriptedModel(["Done."]), [refund], store=durable_store).resume("r1")
    assert result.answer == "Done." and [("refund", key(durable_store, "r1", "c1"))] * 2 == LEDGER


def test_one_call_of_a_turn_decided_at_a_time(durable_store: Any) -> None:
    paused(
        durable_store,
        "r1",
        ToolCall("c1", "refund", {"order": "A"}),
        ToolCall("c2", "refund", {"order": "B"}),
    )
    decide(durable_store, "r1", "c1", "approve", by="ann")
    loop = ReActLoop(ScriptedModel(["Done."]), [refund], store=durable_store)
    again = loop.resume("r1")  # c2 has no decision yet: the turn stays paused
    assert again.stop_reason == "approval_required" and LEDGER == []
    assert [w.call_id for w in waiting(durable_store, "r1")] == ["c2"]  # c1 is decided
    decide(durable_store, "r1", "c2", "deny", by="bob")
    done = loop.resume("r1")
    assert done.answer == "Done." and [("refund", key(durable_store, "r1", "c1"))] == LEDGER


def test_decide_is_refused_while_a_process_drives_the_run(durable_store: Any) -> None:
    inside, release = threading.Event(), threading.Event()

    @tool(read_only=False, requires_approval=True)
    def slow(order: str) -> str:
        """Waits."""
        inside.set()
        assert release.wait(10)
        return "ok"

    model = ScriptedModel([use_tools(ToolCall("c1", "slow", {"order": "A"})), "done"])
    ReActLoop(model, [slow], store=durable_store).run("q", run_id="r1")
    loop = ReActLoop(model, [slow], store=durable_store)
    worker = threading.Thread(target=loop.resume, args=("r1", {"c1": True}))
    worker.start()
    try:
        assert inside.wait(10)
        with pytest.raises(RunLeased):
            decide(durable_store, "r1", "c1", "approve", by="ann")
    finally:
        release.set()
        worker.join(10)


def test_a_paused_result_resumed_without_a_store_takes_approvals_only() -> None:
    loop = ReActLoop(
        ScriptedModel([use_tools(ToolCall("c1", "refund", {"order": "A"})), "ok"]), [refund]
    )
    result = loop.run("q")
    with pytest.raises(DecisionRefused, match="waits for approval: it has not run"):
        loop.resume(result, {"c1": "rerun"})
    assert loop.resume(result, {"c1": "approve"}).answer == "ok"
    assert len(LEDGER) == 1
