"""What a durable run waits on a person for, and the decisions that answer it.

Two questions, kept apart because their answers mean different things:

- **approval**: a call that has *not run* waits for a person: "approve" (True) runs it once
  with the arguments shown, "deny" (False) gives the model an error result instead;
- **doubt**: a call that *started* and whose outcome was never recorded (the process died
  during it) may have taken effect: "rerun" runs it again with the same idempotency key,
  "skip" records it as not run.

An approval given for a call in doubt (or a rerun for a call waiting for approval) is
refused with a message saying which question the call asks: a "yes" to running a call
once is never a "yes" to running it a second time. `decide` records one decision under the
run's lease, from any process (the command line's `runs decide`); `decision_entries` checks
a whole `resume(run_id, decisions)` dict the same way.

Rule: decisions on journaled runs; it reads and appends journal records through a store,
and knows no loop and no driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentloops.engine import _records
from agentloops.engine._chain import Chain
from agentloops.engine.durable import DOUBT
from agentloops.engine.effects import call_key
from agentloops.errors import ConfigurationError, DecisionRefused, RunNotFound
from agentloops.journal.records import Entry, JournalRecord, RunStore
from agentloops.messages import ToolCall

Choice = Literal["approve", "deny", "rerun", "skip"]
Decisions = Mapping[str, bool | str]
"""What `resume(run_id, decisions)` takes: call id to True/False or "approve"/"deny" (a
call waiting for approval), or "rerun"/"skip" (a call in doubt)."""

APPROVAL_CHOICES = ("approve", "deny")
DOUBT_CHOICES = ("rerun", "skip")

_WHAT = {
    "approval": "waits for approval: it has not run",
    "doubt": (
        "is in doubt: it started and its outcome was never recorded, so it may have taken effect"
    ),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Waiting:
    """One call a run waits on a person for (see `waiting`)."""

    run_id: str
    call: ToolCall
    """The call, with the arguments a decision is bound to."""
    why: Literal["approval", "doubt"]
    """"approval": a paused turn's call with no decision yet; "doubt": a call that started
    and never finished, with no decision yet on running it again."""
    key: str
    """The decision record's journal key (the call's idempotency key for a doubt)."""
    seq: int
    """The journal record that asked: the `approval_requested` or the `tool_started`."""

    @property
    def call_id(self) -> str:
        return self.call.id

    @property
    def choices(self) -> tuple[str, str]:
        """The two answers this call takes: ("approve", "deny") or ("rerun", "skip")."""
        return APPROVAL_CHOICES if self.why == "approval" else DOUBT_CHOICES


def waiting(store: RunStore, run_id: str) -> list[Waiting]:
    """The calls the run `run_id` waits on a person for, in journal order: calls waiting for
    approval and calls in doubt (see `Waiting.why`), then those of its sub-runs that have
    not come back (an agent tool's, a handoff's: `Waiting.run_id` names the sub-run, the
    run `decide` takes for them). Reads the journals; takes no lease.

    Raises:
        RunNotFound: no such run.

    Examples:
        >>> from agentloops import MemoryStore
        >>> store = MemoryStore()
        >>> lease = store.start("r1", kind="react", ttl=30)
        >>> call = {"id": "c1", "name": "pay", "args": {"amount": 5}}
        >>> _ = store.append(lease, "approval_requested", {"run": "r1", "calls": [call]})
        >>> [(w.call_id, w.why, w.choices) for w in waiting(store, "r1")]
        [('c1', 'approval', ('approve', 'deny'))]
    """
    return [w for _, past in _tree(store, run_id) for w in pending(past).values()]


def _tree(store: RunStore, run_id: str) -> Iterator[tuple[str, Sequence[JournalRecord]]]:
    """The run and, below it, its sub-runs that have not come back (depth first, in journal
    order), each with its journal (`RunNotFound` for the run, not for a sub-run)."""
    return _below(store, run_id, store.read(run_id))


def _below(
    store: RunStore, run_id: str, past: Sequence[JournalRecord]
) -> Iterator[tuple[str, Sequence[JournalRecord]]]:
    yield run_id, past
    ended = {r.key for r in past if r.kind == "tool_finished"}
    for r in past:
        if r.kind == "tool_started" and "subrun" in r.data and r.key not in ended:
            try:
                below = store.read(r.data["subrun"])
            except RunNotFound:  # started, never begun
                continue
            yield from _below(store, r.data["subrun"], below)


def pending(past: Sequence[JournalRecord]) -> dict[str, Waiting]:
    """What `past` (a run's journal) waits on a person for, by call id."""
    decided = {r.key for r in past if r.kind == "decision"}
    finished = {r.key for r in past if r.kind in ("tool_finished", DOUBT)}
    found: dict[str, Waiting] = {}
    for r in past:
        if r.kind == "approval_requested":
            for c in r.data["calls"]:
                key = call_key(r.data["run"], c["id"])
                if key not in decided:
                    call = ToolCall(c["id"], c["name"], c["args"])
                    found[c["id"]] = Waiting(
                        run_id=r.run_id, call=call, why="approval", key=key, seq=r.seq
                    )
        elif r.kind == "tool_started" and r.key is not None and r.key not in finished:
            if "subrun" in r.data:  # an agent tool's call: its own run says what it waits on
                continue
            call = ToolCall(r.data["id"], r.data["name"], r.data["args"])
            found[call.id] = Waiting(run_id=r.run_id, call=call, why="doubt", key=r.key, seq=r.seq)
    return found


def choice_of(value: object, call_id: str) -> Choice:
    """A decision's value as one of the four choices; anything else is refused (a truthy
    "no" must never approve a call)."""
    if value is True:
        return "approve"
    if value is False:
        return "deny"
    if isinstance(value, str) and value in (*APPROVAL_CHOICES, *DOUBT_CHOICES):
        return value  # type: ignore[return-value]
    raise ConfigurationError(
        f"a decision is True, False, 'approve', 'deny', 'rerun' or 'skip'; "
        f"not {value!r} (for call {call_id!r})"
    )


def approvals(decisions: Decisions) -> dict[str, bool]:
    """`decisions` for a paused result resumed without a store: approvals only (such a
    result has no call in doubt), as True or False."""
    answers = {}
    for call_id, value in decisions.items():
        choice = choice_of(value, call_id)
        if choice in DOUBT_CHOICES:
            raise DecisionRefused(
                f"call {call_id} waits for approval: it has not run; {choice!r} decides a call "
                "in doubt (one that started and whose outcome was never recorded): approve it "
                "(True or 'approve') or deny it (False or 'deny')",
                call_id=call_id,
            )
        answers[call_id] = choice == "approve"
    return answers


def decision_entries(
    run_id: str, past: Sequence[JournalRecord], decisions: Decisions, *, by: str
) -> list[Entry]:
    """The journal entries recording `decisions` (all of `resume`'s dict), checked against
    what `past` waits for. A decision already on record, given again, adds nothing.

    Raises:
        ConfigurationError: a value that is not a decision; a call a paused turn waits on
            left without one while others of it got one.
        DecisionRefused: a decision naming no waiting call, contradicting a recorded one, or
            of the wrong kind (an approval for a call in doubt, or the reverse).
    """
    choices = {call_id: choice_of(value, call_id) for call_id, value in decisions.items()}
    open_calls = pending(past)
    entries = [
        entry
        for call_id, choice in choices.items()
        if (entry := _entry(run_id, past, open_calls, call_id, choice, by, None)) is not None
    ]
    undecided = [w.call_id for w in open_calls.values() if w.why == "approval"]
    missing = [c for c in undecided if c not in choices]
    if missing and len(missing) < len(undecided):
        raise ConfigurationError(f"no decision for pending calls {missing}")
    return entries


def decide(
    store: RunStore,
    run_id: str,
    call_id: str,
    decision: bool | str,
    *,
    by: str,
    reason: str | None = None,
    ttl: float = 30.0,
) -> JournalRecord | None:
    """Record one decision on a call `run_id` waits for, under the run's lease, for the next
    `resume(run_id)` to apply in whatever process has the tools. A call that waits in a
    sub-run below `run_id` (an agent tool's, a handoff's: `waiting` lists it) is decided in
    that sub-run's journal, where its resume looks for it.

    The decision is bound to the call's name and arguments as the journal holds them (the
    ones `waiting` shows): a resume that would run the call with other arguments refuses it.

    Args:
        decision: True / "approve" or False / "deny" for a call waiting for approval;
            "rerun" or "skip" for a call in doubt.
        by: who decided (kept with the decision).
        reason: why, kept with it too.
        ttl: seconds the lease is held for at most while recording.

    Returns:
        The decision's record, or `None` when the same decision was on record already.

    Raises:
        RunNotFound, RunLeased: no such run, or a process drives it now (try again later).
        DecisionRefused: no such waiting call, a contradicting decision on record, or the
            wrong kind of decision for the call (the message says which it takes).
    """
    choice = choice_of(decision, call_id)
    run_id = _waits_in(store, run_id, call_id)
    info = store.run_info(run_id)
    lease = store.acquire(run_id, ttl=ttl)
    try:
        chain = Chain.of(run_id, info.meta)  # None: a format 1 journal, without checksums
        past = _records.checked(store.read(run_id), chain)
        entry = _entry(run_id, past, pending(past), call_id, choice, by, reason)
        if entry is None:
            return None
        entries = [entry] if chain is None else chain.seal([entry])[0]
        return store.append_many(lease, entries)[0]
    finally:
        store.release(lease)


def _waits_in(store: RunStore, run_id: str, call_id: str) -> str:
    """The run whose journal a decision on `call_id` goes into: `run_id` when the call is
    its own, else the one sub-run below it where the call waits (or, waiting nowhere, was
    decided: a second approver's decision is checked against the first)."""
    tree = list(_tree(store, run_id))
    for found in (
        [owner for owner, past in tree if call_id in pending(past)],
        [owner for owner, past in tree if any(_decides(r, call_id) for r in past)],
    ):
        if not found:
            continue
        if found[0] == run_id:  # its own call comes first
            return run_id
        if len(found) > 1:
            raise DecisionRefused(
                f"call {call_id} waits in more than one run below {run_id!r} "
                f"({', '.join(found)}): decide it in the one you mean",
                run_id=run_id,
                call_id=call_id,
            )
        return found[0]
    return run_id


def _decides(record: JournalRecord, call_id: str) -> bool:
    """Whether `record` is a decision (an approval's, or on a call in doubt) on `call_id`."""
    key = record.key
    return record.kind in ("decision", DOUBT) and key is not None and key.endswith(f":{call_id}")


def _entry(
    run_id: str,
    past: Sequence[JournalRecord],
    open_calls: Mapping[str, Waiting],
    call_id: str,
    choice: Choice,
    by: str,
    reason: str | None,
) -> Entry | None:
    """The record for one decision, `None` when it is on record already; refused otherwise."""
    w = open_calls.get(call_id)
    if w is None:
        _on_record_already(run_id, past, open_calls, call_id, choice)
        return None
    if choice not in w.choices:
        raise DecisionRefused(_wrong_kind(run_id, w, choice), run_id=run_id, call_id=call_id)
    data: dict[str, Any] = {
        "approved": choice in ("approve", "rerun"),
        "name": w.call.name,
        "args": w.call.args,
        "by": by,
    }
    if w.why == "doubt":
        data["choice"] = choice
    if reason:
        data["reason"] = reason
    return ("decision" if w.why == "approval" else DOUBT, data, w.key)


def _on_record_already(
    run_id: str,
    past: Sequence[JournalRecord],
    open_calls: Mapping[str, Waiting],
    call_id: str,
    choice: Choice,
) -> None:
    """Pass when the call's decision of the same kind says the same; refuse otherwise."""
    kind = "decision" if choice in APPROVAL_CHOICES else DOUBT
    recorded = [
        r for r in past if r.kind == kind and r.key is not None and r.key.endswith(f":{call_id}")
    ]
    approved = choice in ("approve", "rerun")
    if recorded and all(r.data["approved"] == approved for r in recorded):
        return  # decided so already (a second approver, a retry): nothing to add
    if recorded:
        first = recorded[0].data
        said = _said(kind, bool(first["approved"]))
        raise DecisionRefused(
            f"call {call_id} of run {run_id!r} was already decided: {said} by "
            f"{first.get('by', '?')} (record {recorded[0].seq}); a decision is final",
            run_id=run_id,
            call_id=call_id,
        )
    if not open_calls:
        raise DecisionRefused(
            f"run {run_id!r} is not waiting for approval: no call waits for a "
            f"decision, so none applies to {call_id!r}",
            run_id=run_id,
            call_id=call_id,
        )
    raise DecisionRefused(
        f"run {run_id!r} has no call {call_id!r} waiting for a decision; "
        f"waiting: {sorted(open_calls)}",
        run_id=run_id,
        call_id=call_id,
    )


def _said(kind: str, approved: bool) -> str:
    if kind == "decision":
        return "approved" if approved else "denied"
    return "to run again" if approved else "skipped (not run again)"


def _wrong_kind(run_id: str, w: Waiting, choice: Choice) -> str:
    given = "an approval" if choice in APPROVAL_CHOICES else "a decision on a call in doubt"
    if w.why == "doubt":
        hint = (
            "approving applies to a call that has not run yet; to run this one again (with "
            "the same idempotency key) say 'rerun', or 'skip' to record it as not run"
        )
    else:
        hint = (
            "'rerun' and 'skip' apply to a call that started and whose outcome was never "
            "recorded; approve it (True or 'approve') or deny it (False or 'deny')"
        )
    return (
        f"call {w.call_id} ({w.call.name}) of run {run_id!r} {_WHAT[w.why]}; {given} does "
        f"not apply to it: {hint}"
    )
