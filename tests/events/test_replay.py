"""`agentloops.events.replay_events`: a durable run's journal gives the events its live run
emitted, for each loop, whether the live run was observed or not; reattaching part-way;
and journals written before the records named their loop, role and run."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from replay import journals

from agentloops import (
    ApprovalRequested,
    Event,
    MemoryStore,
    ModelCallFinished,
    ModelError,
    PlanMade,
    ReActLoop,
    Replanned,
    RunFinished,
    StepFinished,
    StepStarted,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from agentloops.events import EventReplay, replay_events
from agentloops.testing import ScriptedModel, respond_structured, use_tools

REPLAYED = (
    ModelCallFinished,
    ToolCallStarted,
    ToolCallFinished,
    ApprovalRequested,
    PlanMade,
    Replanned,
    RunFinished,
    StepStarted,
    StepFinished,
)
"""What a journal holds again: every live event but `RunStarted`, `ModelCallStarted`, the
deltas, and a Plan-and-Execute step's own `RunFinished`."""


@tool
def look(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool(read_only=False, requires_approval=True)
def send(to: str) -> str:
    """Send."""
    return f"sent to {to}"


def comparable(event: Event) -> tuple[Any, ...]:
    """An event without what differs between a live run and its replay: times, durations
    and the cost (the meter's, not journaled)."""
    fields = {
        f.name: getattr(event, f.name)
        for f in dataclasses.fields(event)
        if f.name not in ("at", "ts", "seconds", "cost")
    }
    if isinstance(event, ToolCallFinished):
        fields["outcome"] = dataclasses.replace(event.outcome, seconds=0.0)
    return (type(event).__name__, tuple(sorted(fields.items(), key=lambda kv: kv[0])))


def same_events(replayed: list[Any], live: list[Any]) -> None:
    """The same events, in the same order, except that the starts of one turn's calls come
    all together before their finishes in a replay (the journal writes them at once)."""
    assert sorted(replayed, key=repr) == sorted(live, key=repr)

    def others(events: list[Any]) -> list[Any]:
        return [e for e in events if e[0] != "ToolCallStarted"]

    assert others(replayed) == others(live)


def live_and_replayed(run: Any, store: MemoryStore, run_id: str, kind: str) -> tuple[list, list]:
    seen: list[Event] = []
    run(seen.append)
    live = [
        comparable(e)
        for e in seen
        if isinstance(e, REPLAYED) and not (isinstance(e, RunFinished) and e.run_id != run_id)
    ]
    return live, [comparable(e) for e in replay_events(store.read(run_id), loop=kind)]


def test_a_react_run_replays_as_it_was_seen_live_approval_included(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel(
        [
            use_tools(("look", {"key": "a"}), ("look", {"key": "b"})),
            use_tools(ToolCall("s1", "send", {"to": "ann"})),
            "Sent.",
        ]
    )

    def run(sink: Any) -> None:
        loop = ReActLoop(model, [look, send], store=store, on_event=sink)
        assert loop.run("q", run_id="r1").stop_reason == "approval_required"
        assert loop.resume("r1", {"s1": True}).answer == "Sent."

    live, replayed = live_and_replayed(run, store, "r1", "react")
    same_events(replayed, live)
    names = [name for name, _ in replayed]
    assert names.count("RunFinished") == 2 and "ApprovalRequested" in names


def test_a_rewoo_run_replays_its_plan_and_steps_even_when_nobody_watched(
    ReWOOPipeline: Any,
) -> None:
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "a", "tool_name": "look", "tool_args": {"key": "a"}},
            {
                "step_id": "#E2",
                "description": "b",
                "tool_name": "look",
                "tool_args": {"key": "#E1"},
            },
        ]
    }
    watched, unwatched = MemoryStore(), MemoryStore()
    seen: list[Event] = []
    for store, sink in ((watched, seen.append), (unwatched, None)):
        model = ScriptedModel([respond_structured(plan), "AA"])
        ReWOOPipeline(model, [look], store=store, on_event=sink).run("q", run_id="w1")
    again = [comparable(e) for e in replay_events(unwatched.read("w1"), loop="rewoo")]
    assert again == [comparable(e) for e in replay_events(watched.read("w1"), loop="rewoo")]
    live = [
        comparable(e)
        for e in seen
        if isinstance(e, (*REPLAYED, __import__("agentloops").StepStarted))
    ]
    same_events(again, live)
    [made] = [e for e in replay_events(unwatched.read("w1")) if isinstance(e, PlanMade)]
    assert [s.step_id for s in made.plan.steps] == ["#E1", "#E2"]  # a ReWOOPlan again


def test_a_plan_and_execute_run_replays_with_its_steps(PlanAndExecute: Any) -> None:
    store = MemoryStore()
    plan = {"steps": [{"step_number": 1, "description": "look"}]}
    model = ScriptedModel(
        [respond_structured(plan), use_tools(("look", {"key": "a"})), "A", "Report."]
    )

    def run(sink: Any) -> None:
        PlanAndExecute(model, [look], store=store, on_event=sink).run("t", run_id="p1")

    live, replayed = live_and_replayed(run, store, "p1", "plan_execute")
    same_events(replayed, live)
    assert [n for n, _ in replayed][-1] == "RunFinished"


def test_a_resumed_run_does_not_journal_its_milestones_twice(ReWOOPipeline: Any) -> None:
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "a", "tool_name": "look", "tool_args": {"key": "a"}}
        ]
    }
    store = MemoryStore()
    with pytest.raises(ModelError):
        ReWOOPipeline(
            ScriptedModel([respond_structured(plan), ModelError("down")]), [look], store=store
        ).run("q", run_id="w1")
    before = [r.data["event"] for r in store.read("w1") if r.kind == "event"]
    ReWOOPipeline(ScriptedModel(["A"]), [look], store=store).resume("w1")
    after = [r.data["event"] for r in store.read("w1") if r.kind == "event"]
    assert before == after == ["PlanMade", "StepStarted", "StepFinished"]


def test_a_follower_reattaching_part_way_gets_the_same_totals() -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    ReActLoop(model, [look], store=store).run("q", run_id="r1")
    records = store.read("r1")
    whole = list(replay_events(records, loop="react"))
    replay = EventReplay(loop="react")
    for record in records[:2]:  # seen before the page restarted: no events sent again
        replay.events(record)
    rest = [e for r in records[2:] for e in replay.events(r)]
    assert [comparable(e) for e in rest] == [comparable(e) for e in whole[-len(rest) :]]
    assert rest[-1].model_calls == 2  # counted from the journal's start


def test_records_without_an_event_give_none() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(
        lease, [("decision", {"approved": True}), ("event", {"event": "Nope"}), ("custom", {})]
    )
    assert list(replay_events(store.read("r1"))) == []


def test_a_journal_from_before_loops_and_roles_were_recorded_still_replays() -> None:
    doc = journals.read(journals.CORPUS / "format-1" / "react_paused.json")
    store = MemoryStore()
    run_id = journals.load(store, doc)
    events = list(replay_events(store.read(run_id), loop="react"))
    assert [type(e).__name__ for e in events] == [
        "ModelCallFinished",
        "ToolCallStarted",
        "ToolCallFinished",
        "ModelCallFinished",
        "ApprovalRequested",
        "RunFinished",
    ]
    assert {e.run_id for e in events} == {run_id}
    assert events[1].loop == "" and events[-1].stop_reason == "approval_required"
    assert events[-1].model_calls == 2


def test_with_read_an_agent_tools_sub_run_replays_inside_its_call_as_seen_live() -> None:
    store = MemoryStore()
    inner = ReActLoop(ScriptedModel([use_tools(("look", {"key": "a"})), "A."]), [look])
    seen: list[Event] = []
    outer = ReActLoop(
        ScriptedModel([use_tools(("helper", {"task": "do a"})), "Done: A."]),
        [inner.as_tool("helper", "Helps.")],
        store=store,
        on_event=seen.append,
    )
    assert outer.run("q", run_id="top").answer == "Done: A."
    live = [comparable(e) for e in seen if isinstance(e, REPLAYED)]
    read = store.read
    replayed = [comparable(e) for e in replay_events(read("top"), loop="react", read=read)]
    same_events(replayed, live)
    below = [e for e in replay_events(read("top"), read=read) if e.run_id != "top"]
    assert len(below) == 5 and {e.parent_run_id for e in below} == {"top"}
    # without `read`, as before: the top run's own events only
    alone = [comparable(e) for e in replay_events(read("top"), loop="react")]
    assert alone == [e for e in replayed if dict(e[1])["run_id"] == "top"]


def test_with_read_a_paused_sub_run_shows_each_drive_where_the_run_above_paused_and_went_on() -> (
    None
):
    store = MemoryStore()
    inner = ReActLoop(
        ScriptedModel([use_tools(ToolCall("s1", "send", {"to": "ann"})), "Sent."]), [send]
    )
    outer = ReActLoop(
        ScriptedModel([use_tools(("helper", {"task": "send"})), "Done: sent."]),
        [inner.as_tool("helper", "Helps.")],
        store=store,
    )
    assert outer.run("q", run_id="top").stop_reason == "approval_required"
    assert outer.resume("top", {"s1": True}).answer == "Done: sent."
    shown = [
        (type(e).__name__, "top" if e.run_id == "top" else "sub", getattr(e, "stop_reason", ""))
        for e in replay_events(store.read("top"), loop="react", read=store.read)
    ]
    assert shown == [
        ("ModelCallFinished", "top", "tool_use"),
        ("ToolCallStarted", "top", ""),
        ("ModelCallFinished", "sub", "tool_use"),
        ("ApprovalRequested", "sub", ""),
        ("RunFinished", "sub", "approval_required"),  # the sub-run's first drive
        ("RunFinished", "top", "approval_required"),
        ("ToolCallStarted", "sub", ""),  # resumed: the approved call
        ("ToolCallFinished", "sub", ""),
        ("ModelCallFinished", "sub", "end_turn"),
        ("RunFinished", "sub", "answered"),
        ("ToolCallFinished", "top", ""),
        ("ModelCallFinished", "top", "end_turn"),
        ("RunFinished", "top", "answered"),
    ]
