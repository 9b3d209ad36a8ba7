"""PlanAndExecute resumed after a crash or a pause, here and in another process, with the
run store given as `checkpointer=` (old code's spelling of `store=`).

A run resumes from its last recorded outcome: a finished step, and every model reply and
tool outcome on record, is not asked again. Tools append their name to a log file, so
calls are counted across processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    ApprovalRequired,
    CheckpointError,
    ConfigurationError,
    JournalRecord,
    MemoryCheckpointer,
    ModelError,
    RunExists,
    RunNotFound,
    SQLiteCheckpointer,
    StoreError,
    Tool,
    tool,
)
from agentloops.engine._chain import Chain
from agentloops.engine.session import append
from agentloops.journal import Entry, Lease
from agentloops.testing import ScriptedModel, respond_structured, use_tools

TOOLS = textwrap.dedent(
    """
    from pathlib import Path
    from agentloops import tool

    class SimulatedCrash(BaseException):
        '''The process dies here (not an Exception: nothing may catch it).'''

    def make_tools(log, crash_on=None):
        def logged(name):
            with Path(log).open("a") as f:
                f.write(name + "\\n")
            if name == crash_on:
                raise SimulatedCrash(name)
            return f"{name} result"

        @tool
        def fetch(what: str) -> str:
            '''Fetch something.'''
            return logged("fetch:" + what)

        @tool(read_only=False, requires_approval=True)
        def publish(text: str) -> str:
            '''Publish a text.'''
            return logged("publish")

        return [fetch, publish]
    """
)
_namespace: dict[str, Any] = {}
exec(TOOLS, _namespace)  # the same tool code runs here and in the child processes
SimulatedCrash: type[BaseException] = _namespace["SimulatedCrash"]


def make_tools(log: Path, crash_on: str | None = None) -> list[Tool]:
    tools: list[Tool] = _namespace["make_tools"](log, crash_on)
    return tools


def calls(log: Path) -> Counter[str]:
    return Counter(log.read_text().split()) if log.exists() else Counter()


PLAN = respond_structured(
    {"steps": [{"step_number": n, "description": f"fetch {w}"} for n, w in enumerate("abc", 1)]}
)


def step(what: str) -> list[Any]:
    return [use_tools(("fetch", {"what": what})), f"found {what}"]


def test_a_crash_between_steps_resumes_without_repeating_finished_work(
    tmp_path: Path, PlanAndExecute
) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.log"
    first = ScriptedModel([PLAN, *step("a"), *step("b")])
    agent = PlanAndExecute(
        first, make_tools(log, crash_on="fetch:b"), checkpointer=SQLiteCheckpointer(db)
    )
    with pytest.raises(SimulatedCrash):
        agent.run("Fetch a, b and c.", run_id="crash")
    assert calls(log) == {"fetch:a": 1, "fetch:b": 1}
    # A new process would build everything again: new model, new tools, same file.
    second = ScriptedModel(["found b", *step("c"), "all fetched"])
    fresh = PlanAndExecute(second, make_tools(log), checkpointer=SQLiteCheckpointer(db))
    result = fresh.resume("crash")
    assert result.stop_reason == "answered"
    assert result.step_results == ["found a", "found b", "found c"]
    # fetch:b was in flight when the process died: in doubt, and run again (read-only)
    assert calls(log) == {"fetch:a": 1, "fetch:b": 2, "fetch:c": 1}
    assert second.calls == 4  # no planner call, no step 1, nor step 2's first call
    assert "found a" in second.requests[0].messages[0].text  # step 2 still sees step 1
    assert result.model_calls == 1 + 2 + 2 + 2 + 1  # plan, steps 1-3, report: each once
    # Resuming a finished run returns its result without calling any model.
    again = PlanAndExecute(ScriptedModel([]), make_tools(log), checkpointer=SQLiteCheckpointer(db))
    assert again.resume("crash") == result


def test_a_model_error_carries_the_partial_result_and_resume_continues(PlanAndExecute) -> None:
    store = MemoryCheckpointer()
    model = ScriptedModel([PLAN, "found a", ModelError("overloaded", status=529)])
    agent = PlanAndExecute(model, checkpointer=store)
    with pytest.raises(ModelError) as caught:
        agent.run("t", run_id="r")
    partial = caught.value.result
    assert partial.stop_reason == "error"
    assert partial.model_calls == 2  # the failed call is not counted; step 2 made no other
    assert partial.step_status == ["done", "pending", "pending"]
    assert partial.step_results == ["found a", "", ""]
    assert "overloaded" in partial.detail
    with pytest.raises(ConfigurationError, match="not waiting for approval"):
        agent.resume("r", {"call": True})
    model.script += ["found b", "found c", "report"]
    result = agent.resume("r")
    assert result.step_results == ["found a", "found b", "found c"]
    assert result.answer == "report"


@pytest.mark.parametrize("where", ["planner", "reporter", "replanner"])
def test_a_crash_outside_the_steps_resumes_at_that_call(where: str, PlanAndExecute) -> None:
    boom = ModelError("down")
    keep = respond_structured({"revise": False})
    scripts = {
        "planner": ([boom], [PLAN, "a", "b", "c", "report"]),
        "reporter": ([PLAN, "a", "b", "c", boom], ["report"]),
        "replanner": ([PLAN, "a", boom], [keep, "b", keep, "c", "report"]),
    }
    before, after = scripts[where]
    store = MemoryCheckpointer()
    model = ScriptedModel(before)
    agent = PlanAndExecute(model, checkpointer=store, replan=where == "replanner", max_replans=1)
    with pytest.raises(ModelError):
        agent.run("t", run_id="r")
    model.script += after
    result = agent.resume("r")
    assert result.stop_reason == "answered"
    model.assert_complete()


def test_what_is_journaled_and_when(PlanAndExecute) -> None:
    store = MemoryCheckpointer()
    model = ScriptedModel([PLAN, "found a", "found b", "found c", "report"])
    PlanAndExecute(model, checkpointer=store).run("the task", run_id="r")
    journal = store.read("r")
    events = [r.data["event"] for r in journal if r.kind == "event"]  # for replay_events
    assert events == ["PlanMade"] + ["StepStarted", "StepFinished"] * 3
    journal = [r for r in journal if r.kind != "event"]
    assert [(r.kind, r.data.get("run")) for r in journal] == [
        ("model", "r"),  # the plan
        ("model", "r.1"),  # each step's reply, under the step's own run id
        ("model", "r.2"),
        ("model", "r.3"),
        ("model", "r"),  # the report
        ("result", None),
    ]
    answer = {k: v for k, v in journal[-1].data.items() if k != "sum"}  # sum: its checksum
    assert answer == {"stop_reason": "answered", "answer": "report"}
    info = store.run_info("r")
    assert (info.kind, info.status, info.meta["format"], info.meta["task"]) == (
        "plan_execute",
        "finished",
        2,
        "the task",
    )
    assert sorted(info.meta) == ["fingerprint", "format", "nonce", "task"]
    assert not info.leased  # released when the run ended


def _run_of(store: Any, run_id: str, kind: str, meta: dict[str, Any], *entries: Entry) -> None:
    lease = store.start(run_id, kind=kind, ttl=30, meta=meta)
    if entries:
        store.append_many(lease, list(entries))
    store.release(lease)


def test_unknown_existing_and_unreadable_runs(PlanAndExecute) -> None:
    store = MemoryCheckpointer()
    agent = PlanAndExecute(ScriptedModel([PLAN, "a", "b", "c", "r"]), checkpointer=store)
    with pytest.raises(RunNotFound, match="no run 'nope'"):
        agent.resume("nope")
    agent.run("t", run_id="done")
    with pytest.raises(RunExists, match="'done' exists already"):
        agent.run("t", run_id="done")
    plan = store.read("done")[0]
    _run_of(store, "newer", "plan_execute", {"format": 3, "task": "t"})
    _run_of(store, "alien", "react", {"format": 1, "task": "t"})
    wrong_step = {**plan.data, "step": 5}  # the plan's reply, filed as another call
    _run_of(store, "broken", "plan_execute", {"format": 1, "task": "t"}, ("model", wrong_step))
    for run_id, message in [
        ("newer", "format 3; this agentloops reads up to 2"),
        ("alien", "is a react run, not plan_execute"),
        ("broken", "the journal does not match this loop"),
    ]:
        with pytest.raises(CheckpointError, match=message) as caught:
            agent.resume(run_id)
        assert caught.value.run_id == run_id
    with pytest.raises(ConfigurationError, match="not waiting for approval"):
        agent.resume("done", {"call": True})


def approval_script() -> list[Any]:
    plan = {
        "steps": [
            {"step_number": 1, "description": "fetch"},
            {"step_number": 2, "description": "publish"},
        ]
    }
    return [
        respond_structured(plan),
        *step("a"),
        use_tools(("fetch", {"what": "z"}), ("publish", {"text": "found a"})),
    ]


def test_a_step_waiting_for_approval_pauses_the_run_and_resumes_elsewhere(
    tmp_path: Path, PlanAndExecute
) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.log"
    agent = PlanAndExecute(
        ScriptedModel(approval_script()), make_tools(log), checkpointer=SQLiteCheckpointer(db)
    )
    paused = agent.run("Fetch a and publish it.", run_id="pub")
    assert paused.stop_reason == "approval_required"
    assert paused.step_status == ["done", "paused"]
    [call] = paused.pending_approvals
    assert (call.name, call.args) == ("publish", {"text": "found a"})
    assert calls(log) == {"fetch:a": 1, "fetch:z": 1}  # the allowed call ran; publish waits
    fresh = PlanAndExecute(ScriptedModel([]), make_tools(log), checkpointer=SQLiteCheckpointer(db))
    assert fresh.status("pub").pending_approvals == [call]
    with pytest.raises(ApprovalRequired) as caught:
        paused.raise_for_stop()
    assert caught.value.result is paused
    assert fresh.resume("pub") == paused  # no decision: it stays paused, nothing runs
    with pytest.raises(ConfigurationError, match="no call 'unknown' waiting for a decision"):
        fresh.resume("pub", {"unknown": True})
    model = ScriptedModel(["published", "Done: published."])
    result = PlanAndExecute(model, make_tools(log), checkpointer=SQLiteCheckpointer(db)).resume(
        "pub", {call.id: True}
    )
    assert result.stop_reason == "answered"
    assert result.step_status == ["done", "done"]
    assert calls(log) == {"fetch:a": 1, "fetch:z": 1, "publish": 1}
    [results] = [m for m in model.requests[0].messages if m.role == "user" and m.tool_results]
    assert [r.content for r in results.tool_results] == ["fetch:z result", "publish result"]
    assert fresh.resume("pub", {call.id: True}) == result  # a second approver: nothing again
    with pytest.raises(ConfigurationError, match="already decided"):
        fresh.resume("pub", {call.id: False})
    assert calls(log)["publish"] == 1  # a decision is used once


def test_a_denied_call_inside_a_step_never_runs(PlanAndExecute) -> None:
    log_calls: list[str] = []

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        log_calls.append(text)
        return "published"

    plan = {"steps": [{"step_number": 1, "description": "publish"}]}
    model = ScriptedModel([respond_structured(plan), use_tools(("publish", {"text": "x"}))])
    agent = PlanAndExecute(model, [publish])  # no store: the pause is kept in its own memory
    paused = agent.run("Publish x.", run_id="p")
    model.script += ["not published", "Nothing was published."]
    result = agent.resume("p", {paused.pending_approvals[0].id: False})
    assert result.answer == "Nothing was published."
    assert log_calls == []
    assert "denied" in model.requests[2].messages[-1].tool_results[0].content
    with pytest.raises(RunNotFound):  # without a store, finished runs are not kept
        agent.resume("p")


CHILD = TOOLS + textwrap.dedent(
    """
    import json, sys
    from agentloops import PlanAndExecute, SQLiteCheckpointer
    from agentloops.testing import ScriptedModel, use_tools

    db, log, run_id, decisions, script = sys.argv[1:6]
    items = [use_tools((i["tool"], i["args"])) if isinstance(i, dict) else i
             for i in json.loads(script)]
    model = ScriptedModel(items)
    agent = PlanAndExecute(model, make_tools(log), checkpointer=SQLiteCheckpointer(db))
    result = agent.resume(run_id, json.loads(decisions))
    print(json.dumps({"answer": result.answer, "steps": result.step_results,
                      "stop": result.stop_reason, "model_calls": model.calls}))
    """
)


def resume_in_child(db: Path, log: Path, run_id: str, decisions: Any, script: list[Any]) -> Any:
    argv = [str(db), str(log), run_id, json.dumps(decisions), json.dumps(script)]
    child = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    return json.loads(child.stdout)


def test_another_process_resumes_after_a_crash(tmp_path: Path, PlanAndExecute) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.log"
    agent = PlanAndExecute(
        ScriptedModel([PLAN, *step("a"), *step("b")]),
        make_tools(log, crash_on="fetch:b"),
        checkpointer=SQLiteCheckpointer(db),
    )
    with pytest.raises(SimulatedCrash):
        agent.run("Fetch a, b and c.", run_id="two")
    rest = ["found b", {"tool": "fetch", "args": {"what": "c"}}, "found c", "all fetched"]
    out = resume_in_child(db, log, "two", None, rest)
    assert out == {
        "answer": "all fetched",
        "steps": ["found a", "found b", "found c"],
        "stop": "answered",
        "model_calls": 4,  # step 2's call that asked for fetch:b is on record
    }
    assert calls(log) == {"fetch:a": 1, "fetch:b": 2, "fetch:c": 1}


def test_another_process_gives_the_approval(tmp_path: Path, PlanAndExecute) -> None:
    db, log = tmp_path / "runs.db", tmp_path / "calls.log"
    agent = PlanAndExecute(
        ScriptedModel(approval_script()), make_tools(log), checkpointer=SQLiteCheckpointer(db)
    )
    paused = agent.run("Fetch a and publish it.", run_id="ok")
    out = resume_in_child(
        db, log, "ok", {paused.pending_approvals[0].id: True}, ["yes", "Published."]
    )
    assert out["stop"] == "answered"
    assert out["answer"] == "Published."
    assert calls(log)["publish"] == 1
    final = PlanAndExecute(  # built as the run's (its fingerprint names the tools)
        ScriptedModel([]), make_tools(log), checkpointer=SQLiteCheckpointer(db)
    ).resume("ok")
    assert final.answer == "Published."


def test_a_decision_forged_for_other_arguments_runs_nothing(tmp_path: Path, PlanAndExecute) -> None:
    log = tmp_path / "calls.log"
    store = MemoryCheckpointer()
    agent = PlanAndExecute(ScriptedModel(approval_script()), make_tools(log), checkpointer=store)
    [call] = agent.run("Fetch a and publish it.", run_id="t").pending_approvals
    lease = store.acquire("t", ttl=30)
    forged = {"approved": True, "name": "publish", "args": {"text": "other"}, "by": "someone"}
    chain = Chain.of("t", store.run_info("t").meta)  # sealed as the engine would seal it:
    assert chain is not None  # the checksums refuse a record appended by hand before this
    for record in store.read("t"):
        chain.verify(record)
    append(store, lease, chain, [("decision", forged, f"t.2:{call.id}")])
    store.release(lease)
    with pytest.raises(CheckpointError, match="made for other arguments"):
        agent.resume("t")
    assert calls(log)["publish"] == 0


class FailingStore(MemoryCheckpointer):
    """The store fails on its nth write (a full disk, a dropped connection)."""

    def __init__(self, fail_on: int) -> None:
        super().__init__()
        self.writes, self.fail_on = 0, fail_on

    def append_many(self, lease: Lease, entries: Any, **options: Any) -> list[JournalRecord]:
        self.writes += 1
        if self.writes == self.fail_on:
            raise StoreError("disk full", run_id=lease.run_id)
        return super().append_many(lease, entries, **options)


def test_a_failed_write_stops_the_run_and_resume_goes_on_from_what_was_written(
    PlanAndExecute,
) -> None:
    store = FailingStore(fail_on=3)  # the write before step 3's call, holding step 2's reply
    model = ScriptedModel([PLAN, "found a", "found b"])
    with pytest.raises(StoreError, match="disk full") as caught:
        PlanAndExecute(model, checkpointer=store).run("t", run_id="r")
    assert caught.value.result.step_status == ["done", "done", "pending"]
    assert [r.kind for r in store.read("r") if r.kind != "event"] == ["model", "model", "failed"]
    model = ScriptedModel(["found b again", "found c", "report"])
    result = PlanAndExecute(model, checkpointer=store).resume("r")
    assert result.step_results == ["found a", "found b again", "found c"]
