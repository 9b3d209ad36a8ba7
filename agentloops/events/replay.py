"""A durable run's journal records turned back into the typed events its live run emitted,
so a page can show a run it does not drive, and reattach after a restart.

| record | event |
|---|---|
| `model` | `ModelCallFinished` (its step, role, usage, model and seconds) |
| `tool_started` / `tool_finished` | `ToolCallStarted` / `ToolCallFinished` |
| `approval_requested` | `ApprovalRequested` |
| `event` (what no outcome holds) | `PlanMade`, `Replanned`, `StepStarted`, `StepFinished` |
| `result`, `failed` | `RunFinished`, with the usage and model calls so far (sub-runs' too) |

Decisions and the other records have no live event. Given `read` (a store's `read`), the
events of a sub-run (an agent tool's call, a handoff) come from its own journal, between
its call's `ToolCallStarted` and `ToolCallFinished` as they came live, each naming the run
it is part of (`parent_run_id`). A replayed event's `at` is its
record's time (seconds since the epoch), so replayed events compare with each other,
not with `perf_counter` readings. Records of journals written before agentloops journaled
a call's loop, role and run give "" for the loop and role and the run's own id.

Rule: it imports the events from `kinds` (never the package's facade); it reads records
by their fields (`run_id`, `seq`, `kind`, `data`, `at`, `key`) and knows no store (a
sub-run's journal comes through the `read` it is given); a plan is rebuilt as its loop's
plan model, loaded by name on first use (the loops sit above this module, as the facade
loads them).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agentloops.errors import RunNotFound
from agentloops.events.kinds import (
    ApprovalRequested,
    Event,
    GuardTripped,
    ModelAttempt,
    ModelCallFinished,
    PlanMade,
    Replanned,
    RunFinished,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from agentloops.messages import ToolCall, ToolOutcome, subrun_from_dict
from agentloops.usage import Usage

_PLANS = {
    "rewoo": ("agentloops.rewoo.schema", "ReWOOPlan"),
    "plan_execute": ("agentloops.plan_execute.schema", "Plan"),
}
"""Which model a loop's plan is, by the loop's name."""

_JOURNALED = {cls.__name__: cls for cls in (PlanMade, Replanned, StepStarted, StepFinished)}


Read = Callable[[str], Iterable[Any]]
"""A run's journal records by its id (`store.read`)."""


def replay_events(
    records: Iterable[Any], *, loop: str = "", read: Read | None = None
) -> Iterator[Event]:
    """The events the run emitted, record by record (see the module's table).

    `records` may be a list (`store.read(run_id)`) or a live stream
    (`store.follow(run_id)`): events come as the records do. `loop` names the run's loop
    (`RunInfo.kind`) for its `RunFinished`. `read` (`store.read`) brings in the events of
    its sub-runs, each when its call finishes (or when the run stops with it unfinished).

    Examples:
        >>> from agentloops import MemoryStore, ReActLoop
        >>> from agentloops.testing import ScriptedModel
        >>> store = MemoryStore()
        >>> _ = ReActLoop(ScriptedModel(["Paris."]), [], store=store).run("Capital?", run_id="r1")
        >>> [type(e).__name__ for e in replay_events(store.read("r1"), loop="react")]
        ['ModelCallFinished', 'RunFinished']
    """
    replay = EventReplay(loop=loop, read=read)
    for record in records:
        yield from replay.events(record)


class EventReplay:
    """`replay_events` one record at a time, for a caller that pairs each event with its
    record's `seq` (a server-sent event's id). Feed it the records in order from the
    first (a follower reattaching after seq N feeds records 1..N first, ignoring their
    events, so its `RunFinished` totals count the whole journal)."""

    def __init__(self, *, loop: str = "", read: Read | None = None):
        self.loop = loop
        self.read = read
        self.usage = Usage()
        self.model_calls = 0
        self.seq = 0
        """The last record replayed."""
        self._first_at: float | None = None
        self._open: dict[str, str] = {}
        """Call key -> sub-run id, for the calls of sub-runs not finished yet (with `read`)."""
        self._learns_loop = False
        """A sub-run's replay: its loop is the one its first record names."""
        self._below: dict[str, EventReplay] = {}
        """Each sub-run's own replay, kept so a resumed one goes on after what was shown."""

    def events(self, record: Any) -> list[Event]:
        """The events one record stands for (often one, sometimes none)."""
        at = record.at.timestamp()
        if self._first_at is None:
            self._first_at = at
        self.seq = record.seq
        data: dict[str, Any] = record.data
        if self._learns_loop and not self.loop:
            self.loop = data.get("loop", "")
        make = _MAKERS.get(record.kind)
        if make is None:
            return []
        events = make(self, record.run_id, data, at)
        if events and hasattr(events[0], "ts"):  # the wall clock: the record's time
            events = [dataclasses.replace(e, ts=at) for e in events]
        if self.read is not None:
            events = self._with_subruns(record, events)
        return events

    def _with_subruns(self, record: Any, events: list[Event]) -> list[Event]:
        """`events`, after the events of the sub-runs that `record` ends or leaves."""
        kind = record.kind
        if kind == "tool_started" and "subrun" in record.data:
            self._open[record.key] = record.data["subrun"]
            return events
        if kind == "tool_finished":
            subrun = self._open.pop(record.key, None)
            if subrun is not None:
                return [*self._subrun(subrun, record.run_id, whole=True), *events]
        elif kind in ("result", "failed"):  # a pause or a failure: the sub-runs' drives so far
            parent = record.run_id
            return [e for s in self._open.values() for e in self._subrun(s, parent)] + events
        return events

    def _subrun(self, run_id: str, parent: str, *, whole: bool = False) -> list[Event]:
        """The sub-run's events since those shown, to the end of its journal (`whole`) or of
        its next drive (the record that ends it: it paused or failed with the run above),
        each naming `parent` when it names none."""
        replay = self._below.get(run_id)
        if replay is None:
            replay = self._below[run_id] = EventReplay(read=self.read)
            replay._learns_loop = True
        assert self.read is not None
        try:
            records = [r for r in self.read(run_id) if r.seq > replay.seq]
        except RunNotFound:  # started, never begun
            return []
        events: list[Event] = []
        for r in records:
            events += replay.events(r)
            if not whole and r.kind in ("result", "failed"):
                break
        return [
            e if e.parent_run_id else dataclasses.replace(e, parent_run_id=parent) for e in events
        ]

    def _model(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        response = data["response"]
        usage = Usage(**response["usage"])
        self.usage += usage
        self.model_calls += 1
        event = ModelCallFinished(
            loop=data.get("loop", ""),
            **_ids(run_id, data),
            at=at,
            step=data["step"],
            stop_reason=response["stop_reason"],
            usage=usage,
            model=response["model"],
            seconds=data.get("seconds", 0.0),
            attempts=tuple(ModelAttempt(**a) for a in response.get("attempts", ())),
            role=data.get("role", ""),
        )
        return [event]

    def _tool_started(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        return [
            ToolCallStarted(
                loop=data.get("loop", ""),
                **_ids(run_id, data),
                at=at,
                call_id=data["id"],
                name=data["name"],
                args=data["args"],
            )
        ]

    def _tool_finished(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        outcome = data["outcome"]
        run = None if "run" not in outcome else subrun_from_dict(outcome["run"])
        if run is not None:  # what a sub-run spent counts in its parent's totals, as live
            self.usage += run.usage
            self.model_calls += run.model_calls
        return [
            ToolCallFinished(
                loop=data.get("loop", ""),
                **_ids(run_id, data),
                at=at,
                call_id=data["call_id"],
                name=data["name"],
                outcome=ToolOutcome(
                    content=outcome["content"],
                    is_error=outcome["is_error"],
                    seconds=outcome["seconds"],
                    retry=outcome.get("retry", False),
                    run=run,
                ),
            )
        ]

    def _asked(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        calls = [ToolCall(c["id"], c["name"], c["args"]) for c in data["calls"]]
        loop = data.get("loop", "")
        return [ApprovalRequested(loop=loop, **_ids(run_id, data), at=at, calls=calls)]

    def _journaled(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        cls = _JOURNALED.get(data.get("event", ""))
        if cls is None:
            return []
        names = {f.name for f in dataclasses.fields(cls)}  # not the record's own ("sum")
        fields = {k: v for k, v in data.items() if k in names and k != "at"}
        if cls is PlanMade:
            fields["plan"] = _plan(fields.get("loop", ""), fields["plan"])
        return [cls(**fields, at=at)]

    def _guarded(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        """A guard's verdict: an event when it tripped."""
        if "reason" not in data:
            return []
        fields = {"guard": data["guard"], "stage": data["stage"], "reason": data["reason"]}
        return [GuardTripped(loop=self.loop, **_ids(run_id, data), at=at, **fields)]

    def _ended(self, run_id: str, data: dict[str, Any], at: float) -> list[Event]:
        return [
            RunFinished(
                loop=self.loop,
                run_id=run_id,
                at=at,
                stop_reason=data.get("stop_reason", "failed"),
                usage=self.usage,
                model_calls=self.model_calls,
                seconds=round(at - (self._first_at or at), 6),
            )
        ]


_MAKERS = {
    "model": EventReplay._model,
    "tool_started": EventReplay._tool_started,
    "tool_finished": EventReplay._tool_finished,
    "approval_requested": EventReplay._asked,
    "guard_checked": EventReplay._guarded,
    "event": EventReplay._journaled,
    "result": EventReplay._ended,
    "failed": EventReplay._ended,
}


def _ids(run_id: str, data: dict[str, Any]) -> dict[str, Any]:
    """The run ids of a record's event: a record of a run nested in the journal's (a
    Plan-and-Execute step's) names its own run, whose parent is the journal's run."""
    own = data.get("run", run_id)
    return {"run_id": own, "parent_run_id": run_id if own != run_id else None}


def _plan(loop: str, plan: Any) -> Any:
    """The plan as its loop's model (a dict if the loop is not one we know)."""
    where = _PLANS.get(loop)
    if where is None:
        return plan
    model = getattr(importlib.import_module(where[0]), where[1])
    return model.model_validate(plan)
