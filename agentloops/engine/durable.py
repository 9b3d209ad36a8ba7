"""Durable runs: every outcome journaled before the run moves on, and replayed on resume.

`journaled(machine, ...)` wraps a loop's step machine. Live, it passes each effect to the
driver and records the outcome (a model response; a tool call's start, then its outcome;
what an output validator said) through `Journal` effects. On resume it first answers the
machine from the journal (the machine is deterministic given its outcomes, so it makes the
same requests again and no model or tool call is repeated for an outcome on record), then
goes on live. The journal is consumed as the machine asks (`_Feed`): only the records
read ahead are held, after one streaming pass (`Scan`) learned what must be known first.

A call that started but has no recorded outcome is *in doubt* (the process died during
it). Its tool's `on_doubt` says what happens: "rerun" runs it again with the same
idempotency key; "ask" and "fail" stop the run with `CallInDoubt` (status "in_doubt":
waiting for a person; or "failed": an operator's error) until someone decides
(`resume(run_id, {call_id: "rerun"})` runs it again, "skip" records it as not run). That
decision is its own record (`DOUBT`), apart from an approval of the same call: a "yes"
to running a call once is not a "yes" to running it a second time (`engine.decisions`).

A call of an agent tool is a sub-run with a journal of its own: its start names that run
(`"subrun"`), and a pause of it is not its outcome (nothing is recorded, so the resumed
run meets the call again and its sub-run continues from its own journal).

Rule: it wraps any machine; it knows the journal's records, never a loop or a backend.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from agentloops.engine import _codec
from agentloops.engine.effects import (
    CallModel,
    CheckGuard,
    CheckOutput,
    Decide,
    Effect,
    Emit,
    Journal,
    Machine,
    NextTool,
    R,
    StartTool,
    call_key,
)
from agentloops.engine.subruns import paused
from agentloops.errors import (
    AgentLoopsError,
    CallInDoubt,
    CheckpointError,
    GuardrailTripped,
    ModelError,
    ModelRetry,
)
from agentloops.events import PlanMade, Replanned, StepFinished, StepStarted, event_to_dict
from agentloops.journal import Entry, JournalRecord
from agentloops.messages import ToolCall, ToolOutcome
from agentloops.tools import ToolRegistry

FORMAT = 2
"""The journal layout this version writes (`meta["format"]`); a newer one is refused.
Format 2 added the run's `nonce` to its header (in every idempotency key and the seed of
the checksum chain), a checksum on each record, and the loop's fingerprint; format 1
journals still resume (docs/durability.md says how)."""

CHECKED = "output_checked"
"""The journal kind of an output validator's verdict: the value it kept, or its retry."""

GUARD = "guard_checked"
"""The journal kind of a guard's verdict: the reason it tripped, or none (it passed)."""

FAILED = "model_failed"
"""The journal kind of a model call that failed (`ModelError`): replayed as that error
when the run went on from it (a middleware answered it with a retry)."""

DOUBT = "doubt_decision"
"""The journal kind of a person's decision on a call in doubt (an approval is "decision")."""

EVENT = "event"
"""The journal kind of an event no outcome holds (a plan, a step's start and finish, a
re-plan), kept so that `agentloops.events.replay_events` can show the run again."""

MILESTONES = (PlanMade, Replanned, StepStarted, StepFinished)
"""The events journaled as `EVENT` records (the others are read from the outcomes)."""

Write = Callable[[list[Entry], str | None], None]

_DECLINED = (
    "not run again: this call was in doubt (it started, then the run was interrupted before "
    "its outcome was recorded), and a person chose not to run it again"
)


def journaled(
    machine: Machine[R],
    past: Iterable[JournalRecord],
    write: Write,
    tools: ToolRegistry,
    nonce: str = "",
    observed: bool = True,
) -> Machine[R]:
    """`machine`, replayed from `past` and journaled from there on (see the module doc).

    `past` must have been checked (`engine._records.checked`). `nonce` is the run's, from
    its header: it goes into every idempotency key (`idempotency_key`), so a run started
    later under the same id never repeats a deleted run's keys. `observed`: whether the
    driver hands events on; when not, the machine may still emit (so its `MILESTONES`
    are journaled), and its events go no further.
    """
    replay = _Replay(past, tools, nonce, observed)
    pending: list[Entry] = []
    outcome: Any = None
    error: Exception | None = None
    while True:
        try:
            effect = machine.send(outcome) if error is None else machine.throw(error)
        except StopIteration as done:
            result = done.value
            status = "paused" if result.stop_reason == "approval_required" else "finished"
            if pending or replay.live or replay.ended != status:
                summary = {"stop_reason": result.stop_reason, "answer": result.answer[:2000]}
                yield Journal(write, [*pending, ("result", summary)], status)
            return result  # type: ignore[no-any-return]
        except AgentLoopsError as exc:
            # "ask": the run waits for a person; "fail" (and any other error): it failed
            asking = isinstance(exc, CallInDoubt) and exc.policy == "ask"
            status = "in_doubt" if asking else "failed"
            why = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            if exc.result is not None:  # the partial result's, for the replayed RunFinished
                why["stop_reason"] = exc.result.stop_reason
            failed = ("failed", why)
            if pending and pending[-1][0] == FAILED:  # the error that ended it: `failed` says
                pending.pop()
            with contextlib.suppress(Exception):  # if recording it fails, the first error counts
                yield Journal(write, [*pending, failed], status)
            raise
        outcome, error = None, None
        try:
            outcome = yield from replay.perform(effect, pending, write)
        except _Unread as failed:  # the journal could not be read again: nothing is recorded
            raise failed.error from failed.error.__cause__
        except Exception as exc:  # a driver's or the journal's failure: the machine decides
            error = exc


class _Replay:
    """What the journal already holds for a run, consumed as the machine asks again."""

    def __init__(
        self, past: Iterable[JournalRecord], tools: ToolRegistry, nonce: str, observed: bool
    ):
        self.tools = tools
        self.nonce = nonce
        self.observed = observed
        known = getattr(past, "scan", None)
        scan: Scan = known if isinstance(known, Scan) else Scan.of(past)
        self.feed = _Feed(iter(past), scan)
        """The records the machine is answered from, read as it asks for them."""
        self.events = scan.events
        """Journaled events the machine has not emitted again yet in this replay."""
        self.started = scan.started
        self.decided = scan.decided
        self.reruns = scan.reruns
        self.asked = scan.asked
        self.ended = scan.ended
        self.asking = self._asking(scan.unfinished.values())
        """The calls in doubt that wait for a person's decision (journal order)."""
        self.ready: list[tuple[int, str, ToolOutcome]] = []
        """Replayed calls the machine started, waiting for its `NextTool` (journal order)."""
        self.keys: dict[str, tuple[str, str, str, str]] = {}
        """Call id -> (call key, tool name, run id, loop) of the calls whose outcome is to
        be recorded."""
        self.resumed = scan.records > 0
        self.legacy = self.events == 0 and scan.models > 0
        """A journal written before milestones were journaled (every newer one that holds
        a model call holds its loop's milestones too, or its loop emits none)."""
        self.live = False
        """Whether this session went past where the earlier ones stopped: it made a call of
        its own (a model's or a tool's), asked an output validator, or a call in doubt was
        declined."""

    def perform(self, effect: Effect, pending: list[Entry], write: Write) -> Machine[Any]:
        kind = type(effect)
        if kind is CallModel:
            return (yield from self._model(effect, pending, write))  # type: ignore[arg-type]
        if kind is StartTool:
            return (yield from self._start(effect, pending, write))  # type: ignore[arg-type]
        if kind is NextTool:
            return (yield from self._next(effect, pending, write))  # type: ignore[arg-type]
        if kind is Decide:
            return (yield from self._decide(effect, pending, write))  # type: ignore[arg-type]
        if kind is CheckOutput:
            return (yield from self._check(effect, pending))  # type: ignore[arg-type]
        if kind is CheckGuard:
            return (yield from self._guard(effect, pending, write))  # type: ignore[arg-type]
        if kind is Emit:
            return (yield from self._emit(effect, pending))  # type: ignore[arg-type]
        return (yield effect)

    def _emit(self, effect: Emit, pending: list[Entry]) -> Machine[None]:
        """Hand a live event on (when observed); journal a milestone once (`MILESTONES`)."""
        if isinstance(effect.event, MILESTONES):
            if self.events:  # emitted again for a journaled one
                self.events -= 1
                return None
            if self.legacy and (self.feed.models or self.feed.finishing or self.ready):
                return None  # a journal from before milestones: what it replays has none
            data = event_to_dict(effect.event)
            del data["at"]  # this process's clock: the record has its own time
            data.pop("ts", None)  # the wall clock too: the record's time is it
            pending.append((EVENT, data))
        if self.resumed and not self.live:
            # Until it goes past where the earlier sessions stopped, a resumed run goes where
            # they went (the machine is deterministic), and they sent these events.
            return None
        if self.observed:
            yield effect
        return None

    def _model(self, effect: CallModel, pending: list[Entry], write: Write) -> Machine[Any]:
        record = self.feed.model()
        if record is not None:
            data = record.data
            if (data["run"], data["step"]) != (effect.run_id, effect.step):
                raise _mismatch(record, f"a model call of run {effect.run_id} step {effect.step}")
            if record.kind == FAILED:
                raise _codec.model_error_from_dict(data["error"])
            return _codec.response_from_dict(data["response"])
        yield from _flush(pending, write)
        self.live = True
        return (yield from _called(effect, effect, pending))

    def _guard(self, effect: CheckGuard, pending: list[Entry], write: Write) -> Machine[Any]:
        """A guard's verdict (and, with its call, the call's reply): from the journal, or
        asked now and recorded before the reply."""
        call = effect.call
        record = self.feed.take(GUARD)
        if record is not None:
            data = record.data
            if (data["run"], data["step"], data["guard"]) != (
                effect.run_id,
                effect.step,
                effect.guard,
            ):
                raise _mismatch(record, f"guard {effect.guard!r} of run {effect.run_id}")
            reason = data.get("reason")
            if call is None:
                return reason
            if reason is not None:
                raise GuardrailTripped(reason, guard=effect.guard, stage=effect.stage)
            return (yield from self._model(call, pending, write))  # checked: the call alone
        self.live = True
        verdict = {"run": effect.run_id, "step": effect.step, "guard": effect.guard}
        verdict["stage"] = effect.stage
        if call is None:
            reason = yield effect
            pending.append((GUARD, verdict if reason is None else {**verdict, "reason": reason}))
            return reason
        yield from _flush(pending, write)
        try:
            return (yield from _called(effect, call, pending, (GUARD, verdict)))
        except GuardrailTripped as tripped:
            pending.append((GUARD, {**verdict, "reason": tripped.reason}))
            raise

    def _check(self, effect: CheckOutput, pending: list[Entry]) -> Machine[Any]:
        """An output validator's verdict: from the journal, or asked now and recorded (as
        JSON: the machine validates what comes back, on replay as live)."""
        record = self.feed.take(CHECKED)
        if record is not None:
            data = record.data
            if (data["run"], data["step"]) != (effect.run_id, effect.step):
                raise _mismatch(record, f"an output check of run {effect.run_id}")
            if "retry" in data:
                raise ModelRetry(data["retry"])
            return data["value"]
        step = {"run": effect.run_id, "step": effect.step}
        self.live = True
        try:
            value = yield effect
        except ModelRetry as retry:
            pending.append((CHECKED, {**step, "retry": retry.message}))
            raise
        pending.append((CHECKED, {**step, "value": _codec.jsonable(value)}))
        return value

    def _start(self, effect: StartTool, pending: list[Entry], write: Write) -> Machine[None]:
        call, key = effect.call, effect.call_key
        done = self.feed.finished(key)
        if done is not None:  # ran and recorded: its outcome comes from the journal
            if done.data["name"] != call.name:
                raise _mismatch(done, f"a call of {call.name!r}")
            outcome = _codec.outcome_from_dict(done.data["outcome"])
            self.ready.append((done.seq, call.id, outcome))
            return None
        if key in self.started:  # started, never recorded as finished: in doubt
            if self.asking:  # nothing runs again until a person decided on every one
                raise self._in_doubt()
            if not self._may_rerun(effect):
                return None
        else:
            started = {"id": call.id, "name": call.name, "args": call.args}
            started |= {"run": effect.run_id, "loop": effect.loop}
            if call.name in self.tools.hosted:
                started["subrun"] = key  # an agent tool's call: its run has this id
            pending.append(("tool_started", started, key))
        self.keys[call.id] = (key, call.name, effect.run_id, effect.loop)
        self.live = True
        yield effect if not self.nonce else replace(effect, key=self.idempotency_key(key))
        return None

    def idempotency_key(self, key: str) -> str:
        """A call's idempotency key: its journal key, and the run's nonce (format 2)."""
        return f"{key}@{self.nonce}" if self.nonce else key

    def _policy(self, name: str) -> str:
        tool = self.tools.get(name)
        return tool.on_doubt if tool is not None else "fail"  # a tool gone: an operator's

    def _asking(self, unfinished: Iterable[JournalRecord]) -> list[JournalRecord]:
        return [
            r
            for r in unfinished
            if r.key not in self.reruns and self._policy(r.data["name"]) != "rerun"
        ]

    def _in_doubt(self) -> CallInDoubt:
        """Every call in doubt that waits for a decision, in one error."""
        calls = [ToolCall(r.data["id"], r.data["name"], r.data["args"]) for r in self.asking]
        policies = [self._policy(c.name) for c in calls]
        lines = "; ".join(
            f"{c.id} ({c.name}, on_doubt={p!r}, idempotency key {self.idempotency_key(k)!r})"
            for c, p, k in zip(calls, policies, [str(r.key) for r in self.asking], strict=True)
        )
        decide = ", ".join(f"{c.id!r}: 'rerun'" for c in calls)
        return CallInDoubt(
            f"{len(calls)} call(s) started but their outcome was never recorded ({lines}): "
            f"resume with {{{decide}}} to run them again with the same keys, or with 'skip' "
            "for a call to record it as not run",
            calls=calls,
            policy="fail" if "fail" in policies else "ask",
        )

    def _may_rerun(self, effect: StartTool) -> bool:
        """Whether a call in doubt runs again; if a person declined, its outcome is ready."""
        call, key = effect.call, effect.call_key
        decision = self.reruns.get(key)
        if decision is None or decision["approved"]:  # its tool reruns, or a person said so
            return True
        declined = ToolOutcome(content=_DECLINED, is_error=True)
        self.ready.append((0, call.id, declined))
        self.keys[call.id] = (key, call.name, effect.run_id, effect.loop)
        self.live = True  # the session that started it stopped during it: what follows is new
        return False

    def _next(self, effect: NextTool, pending: list[Entry], write: Write) -> Machine[Any]:
        if self.ready:
            self.ready.sort(key=lambda item: item[0])  # in the order they finished before
            _, call_id, outcome = self.ready.pop(0)
            if call_id in self.keys:  # declined in doubt: record it, so it stays declined
                yield from _flush(pending, write)
                yield Journal(write, [self._finished(call_id, outcome)])
            return call_id, outcome
        if any(entry[0] != EVENT for entry in pending):
            yield from _flush(pending, write)
        # else milestones alone wait for the outcome: where they fall must not change how
        # many writes a run makes (parallel steps finish in any order)
        call_id, outcome = yield effect
        if paused(outcome.run):  # not an end: the resumed run continues its sub-run
            del self.keys[call_id]
            return call_id, outcome
        entries = [*pending, self._finished(call_id, outcome)]
        pending.clear()
        yield Journal(write, entries)
        return call_id, outcome

    def _finished(self, call_id: str, outcome: ToolOutcome) -> Entry:
        key, name, run_id, loop = self.keys.pop(call_id)
        data = {"call_id": call_id, "name": name, "outcome": _codec.outcome_to_dict(outcome)}
        data |= {"run": run_id, "loop": loop}
        return ("tool_finished", data, key)

    def _decide(self, effect: Decide, pending: list[Entry], write: Write) -> Machine[Any]:
        keys = [call_key(effect.run_id, c.id) for c in effect.calls]
        decided = [self.decided.get(k) for k in keys]
        if all(d is not None for d in decided):
            answers = {}
            for call, d in zip(effect.calls, decided, strict=True):
                assert d is not None
                if d["args"] != call.args or d["name"] != call.name:
                    raise CheckpointError(
                        f"the decision on call {call.id} was made for other arguments "
                        f"({d['name']} {d['args']}); it does not apply to {call.args}",
                        run_id=effect.run_id,
                    )
                answers[call.id] = bool(d["approved"])
            return answers
        asked = f"{effect.run_id}:" + ",".join(c.id for c in effect.calls)
        if asked not in self.asked:
            calls = [{"id": c.id, "name": c.name, "args": c.args} for c in effect.calls]
            data = {"run": effect.run_id, "loop": effect.loop, "calls": calls}
            pending.append(("approval_requested", data, asked))
        yield from _flush(pending, write)
        return None  # no decision at hand: the machine pauses the run


def _called(
    effect: CallModel | CheckGuard,
    call: CallModel,
    pending: list[Entry],
    first: Entry | None = None,
) -> Machine[Any]:
    """Perform `effect` (the model call `call`, or a guard's check with it) live, and record
    the reply or the failure (after `first`, the guard's passing verdict, when given)."""
    started = time.perf_counter()
    step = {"run": call.run_id, "step": call.step, "loop": call.loop}
    if call.role:
        step["role"] = call.role
    try:
        response = yield effect
    except ModelError as exc:  # kept: a middleware may answer it with another request
        if first is not None:
            pending.append(first)
        pending.append((FAILED, {**step, "error": _codec.model_error_to_dict(exc)}))
        raise
    seconds = round(time.perf_counter() - started, 6)
    data = {**step, "seconds": seconds, "response": _codec.response_to_dict(response)}
    if first is not None:
        pending.append(first)
    pending.append(("model", data))
    return response


class Scan:
    """What a replay must know before the machine starts, from one pass over the journal
    that keeps no record's body: how many records of each kind it answers from, the keys
    of the calls started and finished, the calls in doubt, the decisions, how it ended."""

    __slots__ = (
        "asked",
        "checks",
        "decided",
        "ended",
        "events",
        "finished",
        "guards",
        "last",
        "models",
        "records",
        "reruns",
        "started",
        "unfinished",
    )

    def __init__(self) -> None:
        self.records = 0
        self.last = 0
        """The last record's seq."""
        self.models = 0
        """The model calls' records a replay answers from (`_Models`)."""
        self.checks = 0
        self.guards = 0
        self.events = 0
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.unfinished: dict[str, JournalRecord] = {}
        """The calls started and never finished (in doubt), by key, in journal order."""
        self.decided: dict[str, dict[str, Any]] = {}
        self.reruns: dict[str, dict[str, Any]] = {}
        self.asked: set[str] = set()
        self.ended: str | None = None
        """How the journal's last session ended: "finished", "paused", "failed", or None."""

    @classmethod
    def of(cls, records: Iterable[JournalRecord]) -> Scan:
        scan = cls()
        for _ in scan.read(records):
            pass
        return scan

    def read(self, records: Iterable[JournalRecord]) -> Iterator[JournalRecord]:
        """Take in `records`, handing each on (a generator: the caller drives it, or
        `of` does)."""
        models = _Models()
        for record in records:
            self.take(record, models)
            yield record
        self.models += models.end()

    def add(self, records: Iterable[JournalRecord]) -> None:
        """Take in records written after the journal was read (none a model call's)."""
        for record in records:
            self.take(record, _Models())

    def take(self, record: JournalRecord, models: _Models) -> None:
        self.records += 1
        self.last = record.seq
        kind = record.kind
        self.models += models.count(record)
        if kind == "tool_started":
            key = str(record.key)
            self.started.add(key)
            self.unfinished[key] = record
        elif kind == "tool_finished":
            self.finished.add(str(record.key))
            self.unfinished.pop(str(record.key), None)
        elif kind == EVENT:
            self.events += 1
        elif kind == CHECKED:
            self.checks += 1
        elif kind == GUARD:
            self.guards += 1
        elif kind == "decision":
            self.decided[str(record.key)] = record.data
        elif kind == DOUBT:
            self.reruns[str(record.key)] = record.data
        elif kind == "approval_requested":
            self.asked.add(str(record.key))
        elif kind == "result":
            paused = record.data["stop_reason"] == "approval_required"
            self.ended = "paused" if paused else "finished"
        elif kind == "failed":
            self.ended = "failed"


class _Models:
    """Which model calls' records a replay answers from, in order: every reply, and every
    failure the run went on from (a middleware's retry followed it). A failure that ended
    its session (a `failed` or `result` record came before the next model call) is not
    replayed: the resumed run calls the model again. Fed one record at a time."""

    __slots__ = ("failure",)

    def __init__(self) -> None:
        self.failure: JournalRecord | None = None

    def kept(self, record: JournalRecord) -> list[JournalRecord]:
        """The records a replay answers from that `record` settles (in order)."""
        kind = record.kind
        if kind in ("failed", "result"):  # where a session ended
            self.failure = None
        elif kind in ("model", FAILED):
            failure, self.failure = self.failure, None
            kept = [] if failure is None else [failure]
            if kind == "model":
                kept.append(record)
            else:
                self.failure = record
            return kept
        return []

    def count(self, record: JournalRecord) -> int:
        kind = record.kind
        if kind in ("failed", "result"):
            self.failure = None
        elif kind in ("model", FAILED):
            kept = 0 if self.failure is None else 1
            self.failure = None if kind == "model" else record
            return kept + (kind == "model")
        return 0

    def end(self) -> int:
        """At the journal's end: a failure that is the last thing (its session stopped at
        it: killed) is replayed."""
        return 0 if self.failure is None else 1

    def last(self) -> list[JournalRecord]:
        failure, self.failure = self.failure, None
        return [] if failure is None else [failure]


class _Unread(BaseException):
    """A replay's read of the journal failed (`error`, the store's): raised past the
    machine, as a failed read when the run was opened would be, with nothing recorded."""

    def __init__(self, error: Exception):
        super().__init__(error)
        self.error = error


class _Feed:
    """The records a replay answers the machine from, read from the journal as it asks:
    only those read ahead but not asked for yet are held (model replies are asked in
    order; a tool call's finish comes after its start)."""

    __slots__ = (
        "_models",
        "buffered",
        "checks",
        "finishing",
        "guards",
        "models",
        "records",
        "tools",
    )

    def __init__(self, records: Iterator[JournalRecord], scan: Scan):
        self.records: Iterator[JournalRecord] | None = records
        self.models = scan.models
        """How many model calls' records are left to replay."""
        self.finishing = set(scan.finished)
        """The keys of the calls whose finish is left to replay."""
        self.checks = scan.checks
        self.guards = scan.guards
        self.buffered: dict[str, deque[JournalRecord]] = {
            "model": deque(),
            CHECKED: deque(),
            GUARD: deque(),
        }
        self.tools: dict[str, JournalRecord] = {}
        """Finishes read ahead, by key."""
        self._models = _Models()

    def model(self) -> JournalRecord | None:
        if not self.models:
            return None
        self.models -= 1
        return self._next("model")

    def take(self, kind: str) -> JournalRecord | None:
        """The next output check's (`CHECKED`) or guard's (`GUARD`) record, or None."""
        if kind == CHECKED:
            if not self.checks:
                return None
            self.checks -= 1
        else:
            if not self.guards:
                return None
            self.guards -= 1
        return self._next(kind)

    def finished(self, key: str) -> JournalRecord | None:
        if key not in self.finishing:
            return None
        self.finishing.discard(key)
        while key not in self.tools and self._read():
            pass
        return self.tools.pop(key, None)

    def _next(self, kind: str) -> JournalRecord | None:
        queue = self.buffered[kind]
        while not queue and self._read():
            pass
        return queue.popleft() if queue else None

    def _read(self) -> bool:
        """Read one more record (sorting it to where it is asked for); False at the end."""
        if self.records is None:
            return False
        try:
            record = next(self.records, None)
        except Exception as exc:  # the store's: not the machine's to decide on
            raise _Unread(exc) from exc
        if record is None:
            self.records = None
            self.buffered["model"].extend(self._models.last())
            return False
        kind = record.kind
        if kind == "tool_finished":
            self.tools[str(record.key)] = record
        elif kind in (CHECKED, GUARD):
            self.buffered[kind].append(record)
        else:
            self.buffered["model"].extend(self._models.kept(record))
        return True


def _flush(pending: list[Entry], write: Write) -> Machine[None]:
    """Write what is buffered, before anything leaves the process (a model call, a tool)."""
    if pending:
        entries = pending[:]
        pending.clear()
        yield Journal(write, entries)


def _mismatch(record: JournalRecord, asked: str) -> CheckpointError:
    return CheckpointError(
        f"run {record.run_id!r}: the journal does not match this loop: record {record.seq} "
        f"({record.kind}) answers {asked}; were the loop's settings, prompts or tools "
        "changed since the run started?",
        run_id=record.run_id,
    )
