"""Durable runs of the three loops, on every store backend and under both drivers: the
journal, replay without repeating work, approvals exactly once, leases, calls in doubt,
and idempotency keys. Fault tests with real processes are in tests/engine/test_durable_faults.py.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentloops import (
    CallInDoubt,
    CheckpointError,
    ConfigurationError,
    DecisionRefused,
    ModelError,
    RunExists,
    RunLeased,
    ToolCall,
    idempotency_key,
    tool,
    validate_transcript,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools

LEDGER: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LEDGER.clear()


@tool
def look(key: str) -> str:
    """Look a key up."""
    LEDGER.append(("look", idempotency_key()))
    return key.upper()


@tool(read_only=False, requires_approval=True)
def send(to: str) -> str:
    """Send a message."""
    LEDGER.append(("send", idempotency_key()))
    return f"sent to {to}"


class Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing records it)."""


def key(store: Any, run_id: str, call: str) -> str:
    """The idempotency key of call `call` (its key in the journal) of run `run_id` (or of
    Plan-and-Execute step `run_id.<n>`): the journal key, then the run's nonce from its
    header."""
    nonce = store.run_info(run_id.split(".")[0]).meta["nonce"]
    return f"{run_id}:{call}@{nonce}"


def test_a_react_run_is_journaled_and_a_finished_run_replays_without_calls(
    durable_store: Any, ReActLoop: Any
) -> None:
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    result = ReActLoop(model, [look], store=durable_store).run("q", run_id="r1")
    assert (
        result.answer == "A."
        and [("look", key(durable_store, "r1", result.messages[1].tool_calls[0].id))] == LEDGER
    )
    kinds = [r.kind for r in durable_store.read("r1")]
    assert kinds == ["model", "tool_started", "tool_finished", "model", "result"]
    assert durable_store.run_info("r1").status == "finished"
    again = ReActLoop(ScriptedModel([]), [look], store=durable_store).resume("r1")
    assert again.messages == result.messages and again.usage == result.usage
    assert len(LEDGER) == 1  # nothing ran again
    assert [r.kind for r in durable_store.read("r1")] == kinds  # and nothing was added


def test_a_run_id_is_used_once(durable_store: Any, ReActLoop: Any) -> None:
    ReActLoop(ScriptedModel(["x"]), [], store=durable_store).run("q", run_id="r1")
    with pytest.raises(RunExists):
        ReActLoop(ScriptedModel(["x"]), [], store=durable_store).run("q", run_id="r1")


def test_a_failed_run_resumes_from_its_last_recorded_outcome(
    durable_store: Any, ReActLoop: Any
) -> None:
    first = ScriptedModel([use_tools(("look", {"key": "a"})), ModelError("provider down")])
    with pytest.raises(ModelError) as info:
        ReActLoop(first, [look], store=durable_store).run("q", run_id="r1")
    assert info.value.result.tool_calls == 1
    assert durable_store.run_info("r1").status == "failed"
    second = ScriptedModel(["A."])
    result = ReActLoop(second, [look], store=durable_store).resume("r1")
    assert result.answer == "A." and len(LEDGER) == 1 and second.calls == 1
    assert result.model_calls == 2  # the first, replayed, and the second, live
    validate_transcript(result.messages)


def test_an_approval_runs_the_call_once_whoever_approves_again(
    durable_store: Any, ReActLoop: Any
) -> None:
    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"})), "Sent."])
    paused = ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    assert paused.stop_reason == "approval_required" and LEDGER == []
    assert durable_store.run_info("r1").status == "paused"
    done = ReActLoop(model, [send], store=durable_store).resume("r1", {"s1": True})
    assert done.answer == "Sent." and [("send", key(durable_store, "r1", "s1"))] == LEDGER
    again = ReActLoop(ScriptedModel([]), [send], store=durable_store).resume("r1", {"s1": True})
    assert again.answer == "Sent." and [("send", key(durable_store, "r1", "s1"))] == LEDGER
    with pytest.raises(ConfigurationError, match="already decided"):
        ReActLoop(ScriptedModel([]), [send], store=durable_store).resume("r1", {"s1": False})


def test_decisions_must_name_waiting_calls_and_be_booleans(durable_store: Any) -> None:
    from agentloops import ReActLoop

    model = ScriptedModel(
        [use_tools(ToolCall("s1", "send", {"to": "a"}), ToolCall("s2", "send", {"to": "b"}))]
    )
    ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    loop = ReActLoop(ScriptedModel([]), [send], store=durable_store)
    with pytest.raises(ConfigurationError, match="no call 'zz' waiting"):
        loop.resume("r1", {"zz": True})
    refused = "a decision is True, False, .approve., .deny., .rerun. or .skip."
    with pytest.raises(ConfigurationError, match=refused):
        loop.resume("r1", {"s1": "yes"})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match=r"no decision for pending calls \['s2'\]"):
        loop.resume("r1", {"s1": True})
    assert not [r for r in durable_store.read("r1") if r.kind == "decision"]


def test_a_reopened_run_that_goes_on_says_running_until_its_drive_ends(
    durable_store: Any, ReActLoop: Any
) -> None:
    """A run that crashes after its decisions are recorded is "running" (it went on), not
    "paused"; one resumed after failing is "running" again from its first new record."""

    def crash(request: Any) -> Any:
        raise Crash

    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"}))])
    ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    assert durable_store.run_info("r1").status == "paused"
    with pytest.raises(Crash):  # approved, sent, then the process died asking for the answer
        ReActLoop(ScriptedModel([crash]), [send], store=durable_store).resume("r1", {"s1": True})
    assert [("send", key(durable_store, "r1", "s1"))] == LEDGER
    assert durable_store.run_info("r1").status == "running"

    failing = ScriptedModel([use_tools(("look", {"key": "a"})), ModelError("down")])
    with pytest.raises(ModelError):
        ReActLoop(failing, [look], store=durable_store).run("q", run_id="r2")
    assert durable_store.run_info("r2").status == "failed"
    with pytest.raises(Crash):
        ReActLoop(ScriptedModel([crash]), [look], store=durable_store).resume("r2")
    assert durable_store.run_info("r2").status == "failed"  # nothing new was written
    two_steps = ScriptedModel([use_tools(("look", {"key": "b"})), crash])
    with pytest.raises(Crash):
        ReActLoop(two_steps, [look], store=durable_store).resume("r2")
    assert durable_store.run_info("r2").status == "running"  # it went on, then died
    done = ReActLoop(ScriptedModel(["B."]), [look], store=durable_store).resume("r2")
    assert done.answer == "B." and durable_store.run_info("r2").status == "finished"


def test_a_denied_call_never_runs(durable_store: Any, ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"})), "Not sent."])
    ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    result = ReActLoop(model, [send], store=durable_store).resume("r1", {"s1": False})
    assert LEDGER == [] and result.messages[2].tool_results[0].is_error


def test_a_run_held_by_another_driver_is_refused_with_who_and_until(durable_store: Any) -> None:
    from agentloops import ReActLoop

    inside, release = threading.Event(), threading.Event()

    @tool
    def wait() -> str:
        """Waits."""
        inside.set()
        assert release.wait(10)
        return "ok"

    loop = ReActLoop(ScriptedModel([use_tools(("wait", {})), "done"]), [wait], store=durable_store)
    worker = threading.Thread(target=loop.run, args=("q",), kwargs={"run_id": "r1"})
    worker.start()
    try:
        assert inside.wait(10)
        with pytest.raises(RunLeased) as info:
            ReActLoop(ScriptedModel([]), [wait], store=durable_store).resume("r1")
        assert info.value.holder and info.value.until
    finally:
        release.set()
        worker.join(10)
    assert durable_store.run_info("r1").status == "finished"


def crashing_run(durable_store: Any, crash_on: str) -> None:
    """A run whose tool `crash_on` is interrupted mid-call: its start is journaled, its
    outcome never is."""
    from agentloops import ReActLoop

    @tool(name=crash_on, read_only=crash_on == "look")
    def dies(key: str) -> str:
        """Dies."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    model = ScriptedModel([use_tools(ToolCall("c1", crash_on, {"key": "k"}))])
    with pytest.raises(Crash):
        ReActLoop(model, [dies], store=durable_store).run("q", run_id="r1")


def test_a_read_only_call_in_doubt_runs_again_with_the_same_key(
    durable_store: Any, ReActLoop: Any
) -> None:
    crashing_run(durable_store, "look")
    result = ReActLoop(ScriptedModel(["K."]), [look], store=durable_store).resume("r1")
    assert result.answer == "K."
    c1 = key(durable_store, "r1", "c1")
    assert [("died", c1), ("look", c1)] == LEDGER  # the same key both times


@tool(read_only=False)
def charge(key: str) -> str:
    """Charges a card."""
    LEDGER.append(("charge", idempotency_key()))
    return "charged"


def test_a_side_effecting_call_in_doubt_waits_for_a_person(
    durable_store: Any, ReActLoop: Any
) -> None:
    crashing_run(durable_store, "charge")
    loop = ReActLoop(ScriptedModel(["Charged."]), [charge], store=durable_store)
    with pytest.raises(CallInDoubt, match="resume with") as info:
        loop.resume("r1")
    assert [c.id for c in info.value.calls] == ["c1"]
    assert durable_store.run_info("r1").status == "in_doubt"
    result = loop.resume("r1", {"c1": "rerun"})  # run it again, with the same key
    assert result.answer == "Charged." and LEDGER[-1] == ("charge", key(durable_store, "r1", "c1"))


def test_a_call_in_doubt_can_be_recorded_as_not_run(durable_store: Any, ReActLoop: Any) -> None:
    crashing_run(durable_store, "charge")
    result = ReActLoop(ScriptedModel(["Skipped."]), [charge], store=durable_store).resume(
        "r1", {"c1": "skip"}
    )
    assert [x for x, _ in LEDGER] == ["died"]
    assert "a person chose not to run it again" in result.messages[2].tool_results[0].content


def test_a_journal_from_a_newer_agentloops_is_refused_by_version(durable_store: Any) -> None:
    from agentloops import ReActLoop

    durable_store.start("r1", kind="react", ttl=30, meta={"format": 99, "task": "q"})
    with pytest.raises(CheckpointError, match="format 99"):
        ReActLoop(ScriptedModel([]), [], store=durable_store).resume("r1")


def test_another_loops_run_is_refused(durable_store: Any) -> None:
    from agentloops import ReActLoop, ReWOOPipeline

    ReActLoop(ScriptedModel(["x"]), [], store=durable_store).run("q", run_id="r1")
    with pytest.raises(CheckpointError, match="is a react run, not rewoo"):
        ReWOOPipeline(ScriptedModel([]), [], store=durable_store).resume("r1")


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "look", "tool_args": {"key": "a"}},
        {"step_id": "#E2", "description": "b", "tool_name": "look", "tool_args": {"key": "#E1"}},
    ]
}


def test_a_rewoo_run_resumes_after_a_failed_solver_without_running_steps_again(
    durable_store: Any, ReWOOPipeline: Any
) -> None:
    first = ScriptedModel([respond_structured(PLAN), ModelError("solver down")])
    with pytest.raises(ModelError):
        ReWOOPipeline(first, [look], store=durable_store).run("q", run_id="w1")
    assert [k for _, k in LEDGER] == [key(durable_store, "w1", f"plan0:#E{n}") for n in (1, 2)]
    result = ReWOOPipeline(ScriptedModel(["AA"]), [look], store=durable_store).resume("w1")
    assert result.answer == "AA" and len(LEDGER) == 2
    assert result.evidence["#E2"].content == "A"


def test_a_plan_and_execute_run_pauses_and_resumes_through_the_store(
    durable_store: Any, PlanAndExecute: Any
) -> None:
    plan = {
        "steps": [
            {"step_number": 1, "description": "look"},
            {"step_number": 2, "description": "send"},
        ]
    }
    first = ScriptedModel(
        [
            respond_structured(plan),
            use_tools(("look", {"key": "a"})),
            "found A",
            use_tools(ToolCall("s1", "send", {"to": "ann"})),
        ]
    )
    paused = PlanAndExecute(first, [look, send], store=durable_store).run("t", run_id="p1")
    assert paused.stop_reason == "approval_required"
    assert [c.id for c in paused.pending_approvals] == ["s1"]
    second = ScriptedModel(["sent", "report"])
    done = PlanAndExecute(second, [look, send], store=durable_store).resume("p1", {"s1": True})
    assert done.answer == "report" and done.step_status == ["done", "done"]
    assert [
        ("look", key(durable_store, "p1.1", _first_call(durable_store, "p1"))),
        ("send", key(durable_store, "p1.2", "s1")),
    ] == LEDGER
    assert second.calls == 2  # nothing before the pause was asked again


def test_a_resumed_run_sends_each_event_once_across_its_sessions(
    durable_store: Any, PlanAndExecute: Any
) -> None:
    """The events a session sent before it stopped are not sent again by the session that
    resumes it, up to the first call it makes live (step 1's finish included)."""
    from agentloops.events import StepFinished, StepStarted

    plan = {"steps": [{"step_number": n, "description": f"step {n}"} for n in (1, 2)]}
    first: list[Any] = []
    model = ScriptedModel([respond_structured(plan), "one", ModelError("down")])
    agent = PlanAndExecute(model, store=durable_store, on_event=first.append)
    with pytest.raises(ModelError):
        agent.run("t", run_id="p1")
    second: list[Any] = []
    model = ScriptedModel(["two", "report"])
    PlanAndExecute(model, store=durable_store, on_event=second.append).resume("p1")
    steps = [
        (type(e).__name__, e.step_id)
        for e in first + second
        if type(e) in (StepStarted, StepFinished)
    ]
    assert steps == [
        ("StepStarted", "1"),
        ("StepFinished", "1"),
        ("StepStarted", "2"),  # sent by the first session, before its model call failed
        ("StepFinished", "2"),
    ]
    assert [type(e).__name__ for e in second][:2] == ["ModelCallStarted", "ModelCallFinished"]


def _first_call(store: Any, run_id: str) -> str:
    return next(r.data["id"] for r in store.read(run_id) if r.kind == "tool_started")


def test_a_store_and_a_checkpointer_are_not_given_together(durable_store: Any) -> None:
    from agentloops import MemoryCheckpointer, PlanAndExecute

    with pytest.raises(ConfigurationError, match="not both"):
        PlanAndExecute(
            ScriptedModel([]), [], store=durable_store, checkpointer=MemoryCheckpointer()
        )


def test_resuming_by_run_id_needs_a_store() -> None:
    from agentloops import ReActLoop, ReWOOPipeline

    with pytest.raises(ConfigurationError, match="needs a store"):
        ReActLoop(ScriptedModel([]), []).resume("r1")
    with pytest.raises(ConfigurationError, match="needs a store"):
        ReWOOPipeline(ScriptedModel([]), []).resume("r1")


def test_idempotency_key_is_none_outside_a_loops_call() -> None:
    assert idempotency_key() is None


def test_an_approved_call_in_doubt_is_asked_about_again_before_it_runs_again(
    durable_store: Any, ReActLoop: Any
) -> None:
    @tool(name="send", read_only=False, requires_approval=True)
    def dies(to: str) -> str:
        """Dies while sending."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"}))])
    ReActLoop(model, [dies], store=durable_store).run("q", run_id="r1")
    with pytest.raises(Crash):  # approved, started, and the process died during it
        ReActLoop(ScriptedModel([]), [dies], store=durable_store).resume("r1", {"s1": True})
    loop = ReActLoop(ScriptedModel(["Sent."]), [send], store=durable_store)
    with pytest.raises(CallInDoubt) as info:  # the approval was for one run, not a second
        loop.resume("r1")
    s1 = key(durable_store, "r1", "s1")
    assert [c.id for c in info.value.calls] == ["s1"] and [("died", s1)] == LEDGER
    assert durable_store.run_info("r1").status == "in_doubt"
    # "Approve everything pending" must not re-run it: an approval is not a re-run.
    with pytest.raises(DecisionRefused, match=r"s1 \(send\) of run 'r1' is in doubt.*'rerun'"):
        loop.resume("r1", {"s1": True})
    assert [("died", s1)] == LEDGER
    result = loop.resume("r1", {"s1": "rerun"})  # a person decides: run it again, same key
    assert result.answer == "Sent." and [("died", s1), ("send", s1)] == LEDGER
    again = ReActLoop(ScriptedModel([]), [send], store=durable_store).resume("r1", {"s1": True})
    assert again.answer == "Sent." and len(LEDGER) == 2  # a second "yes" changes nothing


def test_a_yes_to_a_call_in_doubt_stands_until_its_outcome_is_recorded(
    durable_store: Any, ReActLoop: Any
) -> None:
    crashing_run(durable_store, "charge")

    @tool(name="charge", read_only=False)
    def dies_again(key: str) -> str:
        """Dies again."""
        LEDGER.append(("died again", idempotency_key()))
        raise Crash

    with pytest.raises(Crash):  # run again as decided, and interrupted again
        ReActLoop(ScriptedModel([]), [dies_again], store=durable_store).resume(
            "r1", {"c1": "rerun"}
        )
    # The same decision from a second operator (or a retry) is taken as given, not refused.
    loop = ReActLoop(ScriptedModel(["Charged."]), [charge], store=durable_store)
    result = loop.resume("r1", {"c1": "rerun"})
    assert result.answer == "Charged." and [x for x, _ in LEDGER] == [
        "died",
        "died again",
        "charge",
    ]
    assert [r.kind for r in durable_store.read("r1")].count("doubt_decision") == 1


def test_a_call_in_doubt_of_a_fail_tool_fails_the_run(durable_store: Any) -> None:
    from agentloops import ReActLoop

    @tool(name="wire", read_only=False, on_doubt="fail")
    def dies(key: str) -> str:
        """Wires money."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    model = ScriptedModel([use_tools(ToolCall("c1", "wire", {"key": "k"}))])
    with pytest.raises(Crash):
        ReActLoop(model, [dies], store=durable_store).run("q", run_id="r1")

    @tool(name="wire", read_only=False, on_doubt="fail")
    def wire(key: str) -> str:
        """Wires money."""
        LEDGER.append(("wire", idempotency_key()))
        return "wired"

    loop = ReActLoop(ScriptedModel(["Wired."]), [wire], store=durable_store)
    with pytest.raises(CallInDoubt) as info:
        loop.resume("r1")
    assert info.value.policy == "fail" and durable_store.run_info("r1").status == "failed"
    assert loop.resume("r1", {"c1": "rerun"}).answer == "Wired."  # an operator decided
    c1 = key(durable_store, "r1", "c1")
    assert [("died", c1), ("wire", c1)] == LEDGER


def test_status_reads_a_run_from_its_journal_without_calling_anything(
    durable_store: Any,
) -> None:
    from agentloops import PlanAndExecute, ReWOOPipeline

    plan = {"steps": [{"step_number": 1, "description": "send"}]}
    first = ScriptedModel(
        [respond_structured(plan), use_tools(ToolCall("s1", "send", {"to": "a"}))]
    )
    PlanAndExecute(first, [send], store=durable_store).run("t", run_id="p1")
    paused = PlanAndExecute(ScriptedModel([]), [send], store=durable_store).status("p1")
    assert paused.stop_reason == "approval_required"
    assert [c.id for c in paused.pending_approvals] == ["s1"]

    failing = ScriptedModel([respond_structured(PLAN), ModelError("solver down")])
    with pytest.raises(ModelError):
        ReWOOPipeline(failing, [look], store=durable_store).run("q", run_id="w1")
    partway = ReWOOPipeline(ScriptedModel([]), [look], store=durable_store).status("w1")
    assert partway.stop_reason == "running" and list(partway.evidence) == ["#E1", "#E2"]
    assert len(LEDGER) == 2  # nothing ran again
    with pytest.raises(ConfigurationError, match="needs a store"):
        ReWOOPipeline(ScriptedModel([]), [look]).status("w1")


def test_a_react_runs_status_lists_its_pending_calls(durable_store: Any) -> None:
    from agentloops import ReActLoop

    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"}))])
    ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    status = ReActLoop(ScriptedModel([]), [send], store=durable_store).status("r1")
    assert status.stop_reason == "approval_required"
    assert [c.id for c in status.pending_approvals] == ["s1"] and LEDGER == []


def test_a_journal_that_no_longer_matches_the_loop_is_refused(durable_store: Any) -> None:
    """Resuming with settings that change the run's requests (here: re-planning turned on,
    which asks the replanner where the journal holds a step's reply) is a CheckpointError,
    never a replay that feeds one call's answer to another."""
    from agentloops import PlanAndExecute

    plan = {"steps": [{"step_number": n, "description": f"step {n}"} for n in (1, 2)]}
    first = ScriptedModel([respond_structured(plan), "one", "two", ModelError("reporter down")])
    with pytest.raises(ModelError):
        PlanAndExecute(first, [], store=durable_store).run("t", run_id="p1")
    changed = PlanAndExecute(ScriptedModel([]), [], store=durable_store, replan=True)
    with pytest.raises(CheckpointError, match="does not match this loop"):
        changed.resume("p1")


def test_a_decision_applies_only_to_the_arguments_it_was_made_for(durable_store: Any) -> None:
    """A decision record is bound to the call's name and arguments: one for other arguments
    refuses to run anything, even one sealed into the run's checksum chain (by a writer
    that knows how: the checksums catch accidents and hand edits, not forgers)."""
    from agentloops import ReActLoop
    from agentloops.engine._chain import Chain
    from agentloops.engine.session import append

    model = ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"}))])
    ReActLoop(model, [send], store=durable_store).run("q", run_id="r1")
    lease = durable_store.acquire("r1", ttl=30)
    forged = {"approved": True, "name": "send", "args": {"to": "mallory"}, "by": "someone"}
    chain = Chain.of("r1", durable_store.run_info("r1").meta)
    assert chain is not None
    for record in durable_store.read("r1"):
        chain.verify(record)
    append(durable_store, lease, chain, [("decision", forged, "r1:s1")])
    durable_store.release(lease)
    with pytest.raises(CheckpointError, match="made for other arguments"):
        ReActLoop(ScriptedModel(["x"]), [send], store=durable_store).resume("r1")
    assert LEDGER == []


def test_status_of_a_run_stopped_at_a_call_in_doubt_says_running(durable_store: Any) -> None:
    from agentloops import ReActLoop

    crashing_run(durable_store, "charge")
    status = ReActLoop(ScriptedModel([]), [charge], store=durable_store).status("r1")
    assert status.stop_reason == "running" and status.model_calls == 1
    assert [x for x, _ in LEDGER] == ["died"]  # nothing ran for the status


def test_a_rewoo_run_stopped_inside_the_worker_keeps_the_steps_that_finished(
    durable_store: Any,
) -> None:
    """The error's result (here LeaseLost: the run was deleted while #E2 ran) has #E1's
    evidence, as a status read of the journal does."""
    from agentloops import LeaseLost, ReWOOPipeline

    @tool(name="look")
    def deletes(key: str) -> str:
        """Look a key up; the second call's run is deleted under it."""
        LEDGER.append(("look", idempotency_key()))
        if key != "a":
            durable_store.delete("w1", force=True)
        return key.upper()

    model = ScriptedModel([respond_structured(PLAN)])
    with pytest.raises(LeaseLost) as info:
        ReWOOPipeline(model, [deletes], store=durable_store).run("q", run_id="w1")
    evidence = info.value.result.evidence
    assert {k: o.content for k, o in evidence.items()} == {"#E1": "A"} and len(LEDGER) == 2


def test_a_run_id_reused_after_delete_gets_new_idempotency_keys(
    durable_store: Any, ReActLoop: Any
) -> None:
    """A system that dedupes by key must not take the new run's call for the deleted run's:
    a key carries the run's nonce, new with each run started under the id, and kept in its
    header so a resume (in any process) gives its calls the keys they first had."""

    def run() -> None:
        model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), "A."])
        ReActLoop(model, [look], store=durable_store).run("q", run_id="r1")

    run()
    assert durable_store.delete("r1") is True
    run()
    first, second = [k for _, k in LEDGER]
    assert first != second and first.startswith("r1:c1@") and second.startswith("r1:c1@")
    assert second == key(durable_store, "r1", "c1")  # the nonce in the new run's header


def test_every_call_in_doubt_after_one_crash_is_raised_at_once(
    durable_store: Any, ReActLoop: Any
) -> None:
    """Six calls of one turn in flight when the process died: one `CallInDoubt` names all
    six (not six resumes, one call each), and one resume decides them all."""

    @tool(name="charge", read_only=False)
    def dies(key: str) -> str:
        """Charges a card, and the process dies."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    calls = [ToolCall(f"c{n}", "charge", {"key": str(n)}) for n in range(1, 7)]
    with pytest.raises(Crash):
        ReActLoop(ScriptedModel([use_tools(*calls)]), [dies], store=durable_store).run(
            "q", run_id="r1"
        )
    started = [r.data["id"] for r in durable_store.read("r1") if r.kind == "tool_started"]
    assert started == [c.id for c in calls]  # all six left the process before the crash
    loop = ReActLoop(ScriptedModel(["Charged."]), [charge], store=durable_store)
    with pytest.raises(CallInDoubt) as info:
        loop.resume("r1")
    assert [c.id for c in info.value.calls] == started
    assert "6 call(s)" in str(info.value) and durable_store.run_info("r1").status == "in_doubt"
    decisions = {c.id: "rerun" if c.id != "c3" else "skip" for c in calls}  # all but c3
    result = loop.resume("r1", decisions)
    # (the crashed turn's other calls may still be appending "died" on their threads)
    rerun = [k for x, k in LEDGER if x != "died"]
    assert result.answer == "Charged." and sorted(rerun) == sorted(
        key(durable_store, "r1", c.id) for c in calls if c.id != "c3"
    )


def test_a_rerun_call_in_doubt_waits_with_the_others_for_the_decisions(
    durable_store: Any,
) -> None:
    """A read-only call in doubt next to one that asks: nothing runs again until a person
    decided on the one that asks (the read-only one then runs again by itself)."""
    from agentloops import ReActLoop

    @tool(name="look")
    def look_dies(key: str) -> str:
        """Look a key up, and the process dies."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    @tool(name="charge", read_only=False)
    def charge_dies(key: str) -> str:
        """Charge, and the process dies."""
        LEDGER.append(("died", idempotency_key()))
        raise Crash

    turn = use_tools(ToolCall("l1", "look", {"key": "a"}), ToolCall("c1", "charge", {"key": "b"}))
    with pytest.raises(Crash):
        ReActLoop(ScriptedModel([turn]), [look_dies, charge_dies], store=durable_store).run(
            "q", run_id="r1"
        )
    before = len(LEDGER)
    loop = ReActLoop(ScriptedModel(["Done."]), [look, charge], store=durable_store)
    with pytest.raises(CallInDoubt) as info:
        loop.resume("r1")
    assert [c.id for c in info.value.calls] == ["c1"] and len(LEDGER) == before
    assert loop.resume("r1", {"c1": "rerun"}).answer == "Done."
    assert sorted(x for x, _ in LEDGER[before:]) == ["charge", "look"]
