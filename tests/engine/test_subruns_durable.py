"""Sub-runs with a store, on every backend and under both drivers: each journaled as a run of
its own linked to its parent, a pause two levels down decided through the run at the top
(once, whoever approves again), a parent that failed mid sub-run resumed where the sub-run
stopped, a finished sub-run replayed and not recomputed, calls in doubt below, the status
of a paused tree, and the lease. Real processes (another process deciding, SIGKILL mid
sub-run) are in tests/engine/test_subruns_faults.py."""

from __future__ import annotations

from typing import Any

import pytest
from _subagents import USAGE, calls, results_of

from agentloops import (
    CallInDoubt,
    CheckpointError,
    ConfigurationError,
    DecisionRefused,
    ModelError,
    ModelRequest,
    ModelResponse,
    RunNotFound,
    ToolCall,
    decide,
    idempotency_key,
    tool,
    waiting,
)
from agentloops.engine.runner import new_run_id
from agentloops.engine.session import waiting_below
from agentloops.testing import FunctionModel, respond

LEDGER: list[str] = []
MODEL_CALLS: list[str] = []
KEYS: list[str] = []


def _key() -> str:
    """The call's idempotency key as the ledgers here keep it: its journal key, without
    the nonce of the run it belongs to (in `KEYS`, whole)."""
    key = idempotency_key()
    KEYS.append(key)
    return key.partition("@")[0]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    LEDGER.clear()
    MODEL_CALLS.clear()
    KEYS.clear()


@tool(read_only=False, requires_approval=True)
def pay(invoice: str) -> str:
    """Pay an invoice."""
    LEDGER.append(f"pay {invoice} {_key()}")
    return f"paid {invoice}"


@tool(read_only=False)
def note(text: str) -> str:
    """Write a note down (a side effect: asked about when in doubt)."""
    LEDGER.append(f"note {text} {_key()}")
    return f"noted {text}"


def model(role: str, answer: Any) -> FunctionModel:
    def reply(request: ModelRequest) -> ModelResponse:
        MODEL_CALLS.append(role)
        found = answer(request)
        return respond(found, usage=USAGE) if isinstance(found, str) else found

    return FunctionModel(reply)


def caller(tool_name: str, call_id: str) -> Any:
    """A model that calls `tool_name` once, then answers with what it returned."""

    def answer(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall(call_id, tool_name, {"task": request.messages[0].text}))
        return f"{call_id}: {seen[-1]}"

    return answer


def chain(ReActLoop: Any, store: Any = None) -> Any:
    """top -> manager (agent tool) -> payer (agent tool) -> pay (needs approval)."""
    payer = ReActLoop(model("payer", _payer), [pay], name="payer")
    manager = ReActLoop(model("manager", caller("payer", "m1")), [payer.as_tool("payer", "Pays.")])
    return ReActLoop(
        model("top", caller("manager", "t1")), [manager.as_tool("manager", "Manages.")], store=store
    )


def _payer(request: ModelRequest) -> Any:
    seen = results_of(request.messages)
    if not seen:
        return calls(ToolCall("p1", "pay", {"invoice": "INV-7"}))
    return f"payer: {seen[-1]}"


PATH = ("top", "top:t1", "top:t1:m1")


def test_an_approval_two_levels_down_pauses_the_top_and_is_decided_through_it(
    durable_store: Any, ReActLoop: Any
) -> None:
    paused = chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    assert paused.stop_reason == "approval_required"
    assert [(c.id, c.name) for c in paused.pending_approvals] == [("p1", "pay")]
    assert paused.pending_paths == {"p1": PATH}
    assert paused.model_calls == 3 and LEDGER == []
    statuses = {i.run_id: i.status for i in durable_store.list_runs()}
    assert statuses == {"top": "paused", "top:t1": "paused", "top:t1:m1": "paused"}
    info = durable_store.run_info("top:t1:m1")
    assert (info.kind, info.meta["parent_run_id"], info.meta["call_id"]) == (
        "react",
        "top:t1",
        "m1",
    )
    why, key, call, path = waiting_below(durable_store, "top")["p1"]
    assert (why, key, call.name, path) == ("approval", "top:t1:m1:p1", "pay", PATH)
    status = chain(ReActLoop, durable_store).status("top")
    assert status.stop_reason == "approval_required" and status.pending_paths == {"p1": PATH}

    MODEL_CALLS.clear()
    done = chain(ReActLoop, durable_store).resume("top", {"p1": True})
    assert done.answer == "t1: m1: payer: paid INV-7"
    assert LEDGER == ["pay INV-7 top:t1:m1:p1"]  # the key of the run whose call it is
    nonce = durable_store.run_info("top:t1:m1").meta["nonce"]  # the sub-run's own
    assert [f"top:t1:m1:p1@{nonce}"] == KEYS
    assert MODEL_CALLS == ["payer", "manager", "top"]  # nothing on record was asked again
    assert done.model_calls == 6 and done.tool_calls == 3
    decided = [r for r in durable_store.read("top:t1:m1") if r.kind == "decision"]
    assert [(r.key, r.data["approved"]) for r in decided] == [("top:t1:m1:p1", True)]
    assert not any(r.kind == "decision" for r in durable_store.read("top"))
    assert {i.status for i in durable_store.list_runs()} == {"finished"}

    late = chain(ReActLoop, durable_store).resume("top", {"p1": True})  # a second approver
    assert late.answer == done.answer and len(LEDGER) == 1
    with pytest.raises(ConfigurationError, match="already decided"):
        chain(ReActLoop, durable_store).resume("top", {"p1": False})


def test_a_decision_given_the_top_run_goes_into_the_sub_run_where_the_call_waits(
    durable_store: Any, ReActLoop: Any
) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    record = decide(durable_store, "top", "p1", "approve", by="ops")
    assert record is not None and record.run_id == "top:t1:m1"
    assert not any(r.kind == "decision" for r in durable_store.read("top"))
    assert waiting(durable_store, "top") == []
    assert decide(durable_store, "top", "p1", "approve", by="ops2") is None  # said already
    done = chain(ReActLoop, durable_store).resume("top")
    assert done.answer == "t1: m1: payer: paid INV-7"
    assert LEDGER == ["pay INV-7 top:t1:m1:p1"]


def test_a_call_id_waiting_in_two_sub_runs_is_decided_in_the_one_named(
    durable_store: Any, ReActLoop: Any
) -> None:
    payer = ReActLoop(model("payer", _payer), [pay], name="payer")
    agents = [payer.as_tool("payer_a", "Pays."), payer.as_tool("payer_b", "Pays too.")]

    def top(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if not seen:
            return calls(
                ToolCall("t1", "payer_a", {"task": "INV-7"}),
                ToolCall("t2", "payer_b", {"task": "INV-7"}),
            )
        return " / ".join(seen)

    paused = ReActLoop(model("top", top), agents, store=durable_store).run("Pay.", run_id="top")
    assert paused.stop_reason == "approval_required"
    below = sorted(w.run_id for w in waiting(durable_store, "top"))
    assert below == ["top:t1", "top:t2"]
    with pytest.raises(DecisionRefused, match=r"more than one run below 'top'.*top:t1, top:t2"):
        decide(durable_store, "top", "p1", "approve", by="ops")
    record = decide(durable_store, "top:t2", "p1", "deny", by="ops")
    assert record is not None and record.run_id == "top:t2"
    assert [w.run_id for w in waiting(durable_store, "top")] == ["top:t1"]
    record = decide(durable_store, "top", "p1", "approve", by="ops")  # one left: no doubt
    assert record is not None and record.run_id == "top:t1"


def test_a_denied_call_two_levels_down_is_an_error_result_down_there(
    durable_store: Any, ReActLoop: Any
) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    done = chain(ReActLoop, durable_store).resume("top", {"p1": False})
    assert done.answer.startswith("t1: m1: payer: denied: this call was not approved")
    assert LEDGER == []


def test_a_decision_for_a_call_nowhere_below_is_refused(durable_store: Any, ReActLoop: Any) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    with pytest.raises(ConfigurationError, match="has no call 'p9' waiting"):
        chain(ReActLoop, durable_store).resume("top", {"p9": True})
    with pytest.raises(ConfigurationError, match="a decision is True, False"):
        chain(ReActLoop, durable_store).resume("top", {"p1": "yes"})  # type: ignore[dict-item]


def test_a_call_waiting_two_levels_down_is_listed_and_decided_in_its_own_run(
    durable_store: Any, ReActLoop: Any
) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    with pytest.raises(DecisionRefused, match=r"waits for approval.*approve it"):
        chain(ReActLoop, durable_store).resume("top", {"p1": "rerun"})  # not in doubt
    found = waiting(durable_store, "top")
    assert [(w.run_id, w.call_id, w.why) for w in found] == [("top:t1:m1", "p1", "approval")]
    record = decide(durable_store, found[0].run_id, "p1", "approve", by="ops")
    assert record is not None and record.run_id == "top:t1:m1"
    assert waiting(durable_store, "top") == []
    done = chain(ReActLoop, durable_store).resume("top")
    assert done.answer == "t1: m1: payer: paid INV-7"
    assert LEDGER == ["pay INV-7 top:t1:m1:p1"]


def test_a_sub_run_is_never_resumed_on_its_own(durable_store: Any, ReActLoop: Any) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    payer = ReActLoop(model("payer", _payer), [pay], store=durable_store)
    with pytest.raises(CheckpointError, match="is a sub-run of run 'top:t1'"):
        payer.resume("top:t1:m1", {"p1": True})
    assert LEDGER == []


def test_a_paused_result_resumes_two_levels_down_without_a_store(ReActLoop: Any) -> None:
    top = new_run_id()  # a pause resumes once per process: a run id of its own
    paused = chain(ReActLoop).run("Pay INV-7.", run_id=top)
    assert paused.pending_paths == {"p1": (top, f"{top}:t1", f"{top}:t1:m1")}
    assert paused.usage.total_tokens == 45
    assert paused.subruns[0].state is not None  # what resuming it needs, kept in the result
    done = chain(ReActLoop).resume(paused, {"p1": True})
    assert done.answer == "t1: m1: payer: paid INV-7" and [f"pay INV-7 {top}:t1:m1:p1"] == LEDGER
    assert done.model_calls == 6 and done.usage.total_tokens == 90  # each call counted once
    assert [s.stop_reason for s in done.subruns] == ["answered"]
    with pytest.raises(ConfigurationError, match="already resumed"):
        chain(ReActLoop).resume(paused, {"p1": True})


def test_a_paused_result_with_sub_runs_survives_its_json_state(ReActLoop: Any) -> None:
    import json

    from agentloops import ReActResult

    paused = chain(ReActLoop).run("Pay INV-7.")
    restored = ReActResult.from_state(json.loads(json.dumps(paused.to_state())))
    assert restored == paused
    done = chain(ReActLoop).resume(restored, {"p1": True})
    assert done.answer == "t1: m1: payer: paid INV-7"


def test_a_parent_that_failed_mid_sub_run_resumes_it_where_it_stopped(
    durable_store: Any, ReActLoop: Any
) -> None:
    failing = {"on": True}

    def worker(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if len(seen) == 1 and failing["on"]:
            raise ModelError("overloaded")
        if len(seen) < 2:
            return calls(ToolCall(f"n{len(seen)}", "note", {"text": f"n{len(seen)}"}))
        return f"noted: {seen}"

    def build() -> Any:
        inner = ReActLoop(model("worker", worker), [note])
        return ReActLoop(
            model("top", caller("worker", "t1")), [inner.as_tool("worker", "Works.")],
            store=durable_store,
        )  # fmt: skip

    with pytest.raises(ModelError, match="overloaded") as caught:
        build().run("go", run_id="top")
    assert caught.value.result.run_id == "top"
    assert durable_store.run_info("top").status == "failed"
    assert durable_store.run_info("top:t1").status == "failed"
    assert LEDGER == ["note n0 top:t1:n0"]
    failing["on"] = False
    MODEL_CALLS.clear()
    done = build().resume("top")
    assert LEDGER == ["note n0 top:t1:n0", "note n1 top:t1:n1"]  # n0 did not run again
    assert MODEL_CALLS == ["worker", "worker", "top"]  # the failed call, then on
    assert done.answer.startswith("t1: noted:") and done.model_calls == 5


def test_a_finished_sub_run_is_replayed_not_recomputed(durable_store: Any, ReActLoop: Any) -> None:
    failing = {"on": True}

    def top(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if seen and failing["on"]:
            raise ModelError("overloaded")
        return caller("worker", "t1")(request)

    def worker(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall("w1", "note", {"text": "go"}))
        return f"w1: {seen[-1]}"

    def build() -> Any:
        inner = ReActLoop(model("worker", worker), [note])
        return ReActLoop(
            model("top", top), [inner.as_tool("worker", "Works.")], store=durable_store
        )

    with pytest.raises(ModelError):
        build().run("go", run_id="top")
    assert durable_store.run_info("top:t1").status == "finished"
    failing["on"] = False
    MODEL_CALLS.clear()
    done = build().resume("top")
    assert MODEL_CALLS == ["top"] and len(LEDGER) == 1
    assert done.answer == "t1: w1: noted go" and done.subruns[0].model_calls == 2


def test_a_call_in_doubt_below_stops_the_top_and_is_decided_through_it(
    durable_store: Any, ReActLoop: Any
) -> None:
    class Crash(BaseException):
        """Stands for the process dying during the call."""

    crashing = {"on": True}

    @tool(read_only=False)
    def transfer(amount: int) -> str:
        """Move money."""
        LEDGER.append(f"transfer {amount} {_key()}")
        if crashing["on"]:
            raise Crash
        return "moved"

    def mover(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        return f"mover: {seen[-1]}" if seen else calls(ToolCall("x1", "transfer", {"amount": 100}))

    def build() -> Any:
        inner = ReActLoop(model("mover", mover), [transfer])
        return ReActLoop(
            model("top", caller("mover", "t1")),
            [inner.as_tool("mover", "Moves.")],
            store=durable_store,
        )

    with pytest.raises(Crash):
        build().run("go", run_id="top")
    crashing["on"] = False
    with pytest.raises(CallInDoubt) as caught:
        build().resume("top")
    assert [c.id for c in caught.value.calls] == ["x1"]
    assert caught.value.result.run_id == "top"
    assert waiting_below(durable_store, "top")["x1"][0] == "doubt"
    with pytest.raises(DecisionRefused, match=r"in doubt.*'rerun'"):  # not an approval
        build().resume("top", {"x1": True})
    assert [w.why for w in waiting(durable_store, "top")] == ["doubt"]
    assert waiting(durable_store, "top")[0].run_id == "top:t1"  # the run to decide in
    done = build().resume("top", {"x1": "rerun"})
    assert done.answer == "t1: mover: moved"
    assert LEDGER == ["transfer 100 top:t1:x1"] * 2  # once crashed, once again by decision


def test_a_sub_run_is_driven_under_its_parents_holder(durable_store: Any, ReActLoop: Any) -> None:
    holders: list[tuple[str | None, str | None]] = []

    @tool
    def peek() -> str:
        """See who holds the runs."""
        top = durable_store.run_info("top").holder
        below = durable_store.run_info("top:t1").holder
        holders.append((top, below))
        return "seen"

    def peeker(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        return f"k1: {seen[-1]}" if seen else calls(ToolCall("k1", "peek", {}))

    inner = ReActLoop(model("peeker", peeker), [peek])
    ReActLoop(
        model("top", caller("peeker", "t1")), [inner.as_tool("peeker", "Peeks.")],
        store=durable_store,
    ).run("go", run_id="top")  # fmt: skip
    ((top, below),) = holders
    assert top is not None and top == below
    assert durable_store.run_info("top:t1").holder is None  # released when it ended
    started = [r for r in durable_store.read("top") if r.kind == "tool_started"]
    assert started[0].data["subrun"] == "top:t1"


def test_plan_and_execute_pauses_for_a_step_sub_agents_call_and_resumes_by_id(
    durable_store: Any, PlanAndExecute: Any, ReActLoop: Any
) -> None:
    from agentloops.testing import respond_structured

    def planner(request: ModelRequest) -> Any:
        if request.output is not None:
            return respond_structured({"steps": [{"step_number": 1, "description": "pay"}]})
        return f"report: {request.messages[-1].text[-40:]}"

    def build() -> Any:
        payer = ReActLoop(model("payer", _payer), [pay])
        return PlanAndExecute(
            model("planner", planner),
            [payer.as_tool("payer", "Pays.")],
            executor=model("step", caller("payer", "s1")),
            store=durable_store,
        )

    paused = build().run("Pay INV-7.", run_id="pe")
    assert paused.stop_reason == "approval_required"
    assert paused.pending_paths == {"p1": ("pe", "pe.1", "pe.1:s1")}
    done = build().resume("pe", {"p1": True})
    assert done.stop_reason == "answered" and LEDGER == ["pay INV-7 pe.1:s1:p1"]
    assert [s.name for s in done.subruns] == ["payer"]


@pytest.mark.parametrize("durable", [False, True])
def test_a_plan_and_execute_sub_agent_pauses_its_caller_and_resumes_with_it(
    durable: bool, durable_store: Any, PlanAndExecute: Any, ReActLoop: Any
) -> None:
    from agentloops.testing import respond_structured

    def planner(request: ModelRequest) -> Any:
        if request.output is not None:
            return respond_structured({"steps": [{"step_number": 1, "description": "pay"}]})
        return "report: paid"

    store = durable_store if durable else None
    # One planner for every loop built: a checkpointer in memory keeps the paused run there.
    sub = PlanAndExecute(model("planner", planner), [pay], executor=model("step", _payer))

    def build() -> Any:
        return ReActLoop(
            model("top", caller("deep", "t1")), [sub.as_tool("deep", "Researches.")], store=store
        )

    top = new_run_id()
    paused = build().run("Pay INV-7.", run_id=top)
    assert paused.stop_reason == "approval_required"
    assert paused.pending_paths == {"p1": (top, f"{top}:t1", f"{top}:t1.1")}
    if not durable:  # journaled in the sub-agent's own store, as its own run
        assert sub.status(f"{top}:t1").stop_reason == "approval_required"
        assert paused.subruns[0].state == {"journal": f"{top}:t1"}
    resumed = build().resume(top if durable else paused, {"p1": True})
    assert resumed.answer == "t1: report: paid" and [f"pay INV-7 {top}:t1.1:p1"] == LEDGER
    assert resumed.model_calls == 6  # top 2; planner 1, step 2, reporter 1: each once
    if durable:  # its milestones journaled once, paused or not, and replayed from there
        from agentloops.events import replay_events

        below = durable_store.read(f"{top}:t1")
        kinds = [type(e).__name__ for e in replay_events(r for r in below if r.kind == "event")]
        assert kinds == ["PlanMade", "StepStarted", "StepFinished"]
        assert all(e.run_id.startswith(f"{top}:t1") for e in replay_events(below))
    if not durable:  # finished: its own store forgot it
        with pytest.raises(RunNotFound):
            sub.status(f"{top}:t1")


def test_a_plan_and_execute_steps_paused_sub_agent_resumes_without_a_store(
    PlanAndExecute: Any, ReActLoop: Any
) -> None:
    from agentloops.testing import respond_structured

    def planner(request: ModelRequest) -> Any:
        if request.output is not None:
            return respond_structured({"steps": [{"step_number": 1, "description": "pay"}]})
        return "report: paid"

    payer = ReActLoop(model("payer", _payer), [pay])
    loop = PlanAndExecute(
        model("planner", planner),
        [payer.as_tool("payer", "Pays.")],
        executor=model("step", caller("payer", "s1")),
    )
    top = new_run_id()
    paused = loop.run("Pay INV-7.", run_id=top)
    assert paused.pending_paths == {"p1": (top, f"{top}.1", f"{top}.1:s1")}
    with pytest.raises(CheckpointError, match="is a react run"):  # the sub-run, kept
        loop.status(f"{top}.1:s1")
    done = loop.resume(top, {"p1": True})
    assert done.answer == "report: paid" and [f"pay INV-7 {top}.1:s1:p1"] == LEDGER
    assert done.model_calls == 6 and [s.name for s in done.subruns] == ["payer"]
    for forgotten in (top, f"{top}.1:s1"):  # the loop's own store forgot the finished tree
        with pytest.raises(RunNotFound):
            loop.status(forgotten)


def test_calls_of_one_id_in_two_sub_runs_are_told_apart_by_their_runs(
    durable_store: Any, ReActLoop: Any
) -> None:
    def build(store: Any) -> Any:
        left = ReActLoop(model("left", _payer), [pay])
        right = ReActLoop(model("right", _payer), [pay])

        def top(request: ModelRequest) -> Any:
            seen = results_of(request.messages)
            if not seen:
                return calls(
                    ToolCall("a", "left", {"task": "x"}), ToolCall("b", "right", {"task": "y"})
                )
            return " | ".join(seen)

        tools = [left.as_tool("left", "Pays."), right.as_tool("right", "Pays.")]
        return ReActLoop(model("top", top), tools, store=store)

    rid = new_run_id()
    paused = build(None).run("go", run_id=rid)
    assert list(paused.pending_paths) == ["p1", f"{rid}:b:p1"]  # both calls are "p1"
    done = build(None).resume(paused, {"p1": True, f"{rid}:b:p1": False})
    assert done.answer.startswith("payer: paid INV-7 | payer: denied")
    assert [f"pay INV-7 {rid}:a:p1"] == LEDGER

    LEDGER.clear()
    build(durable_store).run("go", run_id="top")
    below = waiting_below(durable_store, "top")
    assert sorted(below) == ["p1", "top:b:p1"]
    done = build(durable_store).resume("top", {"top:a:p1": False, "top:b:p1": True})
    assert done.answer.startswith("payer: denied") and LEDGER == ["pay INV-7 top:b:p1"]


def test_a_sub_run_waits_for_a_stale_lease_of_its_own_to_lapse(
    durable_store: Any, ReActLoop: Any
) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    stale = durable_store.acquire("top:t1", ttl=0.5)  # a holder that stopped, say
    done = chain(ReActLoop, durable_store).resume("top", {"p1": True})
    assert done.answer == "t1: m1: payer: paid INV-7"
    assert durable_store.run_info("top:t1").epoch == stale.epoch + 1


def test_a_sub_run_stops_writing_when_its_parents_lease_is_lost(
    durable_store: Any, ReActLoop: Any
) -> None:
    import time

    from agentloops import LeaseLost

    @tool
    def stall() -> str:
        """Take a while."""
        durable_store.delete("top", force=True)  # the top run is taken from its holder
        time.sleep(0.5)  # long enough for its keeper to notice
        return "late"

    def staller(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        return f"s1: {seen[-1]}" if seen else calls(ToolCall("s1", "stall", {}))

    inner = ReActLoop(model("staller", staller), [stall])
    loop = ReActLoop(
        model("top", caller("staller", "t1")),
        [inner.as_tool("staller", "Stalls.")],
        store=durable_store,
        lease_ttl=0.3,
    )
    with pytest.raises(LeaseLost):
        loop.run("go", run_id="top")
    kinds = [r.kind for r in durable_store.read("top:t1")]
    assert "tool_finished" not in kinds  # its outcome was not written after the loss


def test_a_decision_written_in_the_sub_runs_own_journal_is_applied_by_resuming_the_top(
    durable_store: Any, ReActLoop: Any
) -> None:
    """The run-id rule a tool that records decisions itself (a CLI) follows: the call's
    decision goes in the journal of the run it belongs to (`pending_paths[-1]`), keyed by
    that run's id and the call's id; `resume(top)` then applies it."""
    paused = chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    owner, call = paused.pending_paths["p1"][-1], paused.pending_approvals[0]
    from agentloops.engine import _records
    from agentloops.engine._chain import Chain
    from agentloops.engine.session import append

    lease = durable_store.acquire(owner, ttl=5.0)
    seal = Chain.of(owner, durable_store.run_info(owner).meta)  # sealed into its chain
    _records.checked(durable_store.read(owner), seal)
    data = {"approved": True, "name": call.name, "args": call.args, "by": "cli"}
    append(durable_store, lease, seal, [("decision", data, f"{owner}:{call.id}")])
    durable_store.release(lease)
    done = chain(ReActLoop, durable_store).resume("top")
    assert done.answer == "t1: m1: payer: paid INV-7" and LEDGER == ["pay INV-7 top:t1:m1:p1"]


def test_a_sub_agent_with_a_store_of_its_own_journals_there_under_a_caller_without_one(
    durable_store: Any, ReActLoop: Any
) -> None:
    payer = ReActLoop(model("payer", _payer), [pay], store=durable_store)
    top = ReActLoop(model("top", caller("payer", "t1")), [payer.as_tool("payer", "Pays.")])
    rid = new_run_id()
    paused = top.run("Pay INV-7.", run_id=rid)
    assert paused.pending_paths == {"p1": (rid, f"{rid}:t1")}
    assert durable_store.run_info(f"{rid}:t1").status == "paused"
    with pytest.raises(CheckpointError, match="is a sub-run of run"):
        payer.resume(f"{rid}:t1", {"p1": True})  # only through the call that made it
    done = top.resume(paused, {"p1": True})
    assert done.answer == "t1: payer: paid INV-7" and [f"pay INV-7 {rid}:t1:p1"] == LEDGER
    assert durable_store.run_info(f"{rid}:t1").status == "finished"  # a store of its own keeps it


def test_a_sub_run_left_by_a_deleted_run_of_the_same_id_is_replaced_not_replayed(
    durable_store: Any, ReActLoop: Any
) -> None:
    def noter(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        return f"noter: {seen[-1]}" if seen else calls(ToolCall("n1", "note", {"text": "x"}))

    def build() -> Any:
        sub = ReActLoop(model("noter", noter), [note])
        tools = [sub.as_tool("noter", "Notes.")]
        return ReActLoop(model("top", caller("noter", "t1")), tools, store=durable_store)

    first = build().run("Note x.", run_id="top")
    nonce = durable_store.run_info("top").meta["nonce"]
    assert durable_store.run_info("top:t1").meta["parent_nonce"] == nonce
    durable_store.delete("top")  # its sub-run stays behind
    MODEL_CALLS.clear()
    again = build().run("Note x.", run_id="top")
    assert again.answer == first.answer == "t1: noter: noted x"
    assert MODEL_CALLS == ["top", "noter", "noter", "top"]  # the sub-run ran afresh
    assert LEDGER == ["note x top:t1:n1", "note x top:t1:n1"]
    assert len(set(KEYS)) == 2  # each sub-run's nonce in its calls' keys
    assert durable_store.run_info("top:t1").meta["parent_nonce"] != nonce


def test_a_fork_renames_its_sub_runs_and_runs_an_unfinished_one_as_its_own(
    durable_store: Any, ReActLoop: Any
) -> None:
    chain(ReActLoop, durable_store).run("Pay INV-7.", run_id="top")
    chain(ReActLoop, durable_store).resume("top", {"p1": True})
    past = durable_store.read("top")
    started = next(r for r in past if r.kind == "tool_started")
    finished = next(r for r in past if r.kind == "tool_finished")

    after = chain(ReActLoop, durable_store).fork("top", at=finished.seq, new_run_id="f1")
    assert after.answer == "t1: m1: payer: paid INV-7" and len(LEDGER) == 1  # replayed
    copied = next(r for r in durable_store.read("f1") if r.kind == "tool_started")
    assert (copied.key, copied.data["subrun"]) == ("f1:t1", "f1:t1")

    before = chain(ReActLoop, durable_store).fork("top", at=started.seq, new_run_id="f2")
    assert before.stop_reason == "approval_required"  # its own sub-run, paused below
    assert [(w.run_id, w.call_id) for w in waiting(durable_store, "f2")] == [("f2:t1:m1", "p1")]
    done = chain(ReActLoop, durable_store).resume("f2", {"p1": "approve"})
    assert done.answer == "t1: m1: payer: paid INV-7"
    assert LEDGER == ["pay INV-7 top:t1:m1:p1", "pay INV-7 f2:t1:m1:p1"]
