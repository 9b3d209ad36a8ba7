"""A durable run's hold on its store: the lease and its keeper, the writes that name it,
and the approvals recorded under it.

A run is driven by one holder at a time. `begin` creates the run holding its lease (its
header keeps the journal's format, the run's nonce and the loop's fingerprint); `reopen`
takes the lease of an existing run (`RunLeased`, naming the holder and until when, while
another holder drives it), checks the loop's fingerprint, records the decisions it was
given (checked by `engine.decisions`), and reads and checks the journal to replay (a page
at a time: `Streamed`). Every
journal write names the lease, so a holder that lost it (it stalled past the expiry and
the run was taken over) writes nothing and stops, and every record it writes is sealed
into the run's checksum chain.

A sub-run (an agent tool's, a handoff's) is a run of its own in the same store, opened by
its parent's session (`begin(..., parent=)`, `reopen(..., parent=)`) under the parent's
holder: its writes stop when either lease is lost, and it is never resumed on its own.
A decision for a call of a sub-run, given to `reopen` of the run at the top, is recorded
in the journal of the run the call belongs to (`waiting_below` finds it).

Rule: this module holds runs, it does not drive them (`agentloops.engine.runner` does),
and knows no loop.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentloops import _pool
from agentloops.engine import _fingerprint, _records
from agentloops.engine._chain import Chain
from agentloops.engine.decisions import (
    APPROVAL_CHOICES,
    Decisions,
    choice_of,
    decision_entries,
    pending,
)
from agentloops.engine.durable import DOUBT, FORMAT, Scan, journaled
from agentloops.engine.effects import Machine, R
from agentloops.engine.fork import Replacement, fork_entries, fork_meta
from agentloops.engine.host import ToolHost
from agentloops.errors import (
    CheckpointError,
    ConfigurationError,
    DecisionRefused,
    JournalConflict,
    LeaseLost,
    RunLeased,
    StoreError,
)
from agentloops.journal._base import NewRecord, iter_records
from agentloops.journal.records import Entry, JournalRecord, Lease, RunInfo, RunStore
from agentloops.messages import ToolCall


@dataclass(frozen=True, slots=True)
class Durability:
    """What a loop was given to make its runs durable (each lease's holder id is the
    store's default: unique per acquisition)."""

    store: RunStore
    lease_ttl: float = 30.0
    forget_finished: bool = False
    """Delete a run from the store once it finishes: a loop's private store keeps only
    the runs that can still be resumed (paused, failed, interrupted)."""


def check_store(store: object, argument: str = "store") -> RunStore:
    """`store` as a `RunStore`, or a `ConfigurationError` saying what to give instead (an
    object with only `save`/`load`/`delete` follows the old checkpointer protocol)."""
    if isinstance(store, RunStore):
        return store
    name = type(store).__name__
    if all(callable(getattr(store, m, None)) for m in ("save", "load", "delete")):
        raise ConfigurationError(
            f"{argument}= takes a RunStore, and {name} has only save/load/delete: the old "
            "Checkpointer protocol, which kept one whole state per run with no lease (two "
            "processes could both run a tool). Give MemoryCheckpointer() or "
            "SQLiteCheckpointer(path) (names of MemoryStore and SQLiteStore), a "
            "PostgresStore, or a class of your own implementing RunStore "
            "(docs/durability.md#the-protocol); docs/checkpoints.md says how to move"
        )
    raise ConfigurationError(
        f"{argument}= takes a RunStore (MemoryStore, SQLiteStore, PostgresStore, or your "
        f"own implementing the protocol in docs/durability.md), not {name}"
    )


class Hold(Protocol):
    """An opened run, held while it is driven: a `Session`, or a plain run's stand-in."""

    meta: dict[str, Any]

    def journaled(
        self, machine: Machine[R], host: ToolHost, observed: bool = True
    ) -> Machine[R]: ...
    def __enter__(self) -> Hold: ...
    def __exit__(self, *exc: object) -> None: ...
    async def __aenter__(self) -> Hold: ...
    async def __aexit__(self, *exc: object) -> None: ...


class Session:
    """One holder's turn at driving a run: use it as a context manager around the drive."""

    def __init__(
        self,
        d: Durability,
        lease: Lease,
        meta: dict[str, Any],
        past: list[JournalRecord] | Streamed,
        chain: Chain | None,
        parent: Session | None = None,
        *,
        status: str = "running",
    ):
        self.store = d.store
        self.forget = d.forget_finished and parent is None  # the top run forgets its tree
        self.meta = meta
        self.past = past
        self.status: str | None = None
        """The status this session last wrote."""
        self.chain = chain
        """Where the run's checksum chain stands (`None`: a format 1 journal has none)."""
        self.parent = parent
        """The session of the run this one is a sub-run of: its lease covers this run."""
        self.hosting = False
        """Whether its run may make sub-runs (its tools have agent tools or handoffs)."""
        self._status = status
        """The header's status as this holder last set it (or found it, when reopening)."""
        from agentloops.journal.keeper import LeaseKeeper  # with the first durable run

        self.keeper = LeaseKeeper(d.store, lease)

    def started(self, key: str) -> bool:
        """Whether the journal, as it was opened, holds the start of the call `key`."""
        if isinstance(self.past, Streamed):
            return key in self.past.scan.started
        return any(r.kind == "tool_started" and r.key == key for r in self.past)

    @property
    def holder(self) -> str:
        return self.keeper.lease.holder

    @property
    def lease_ttl(self) -> float:
        return self.keeper.lease.ttl

    def write(self, entries: list[Entry], status: str | None) -> None:
        """Append under the lease (fenced: `LeaseLost` if it is no longer ours, or if the
        parent run's is no longer its holder's). The first write of a reopened run that
        goes on sets its status back to "running", so a crash from here on does not leave
        it saying "paused", "in_doubt" or "failed"."""
        status = self._writing(status)
        write(self.store, self.keeper.lease, self.chain, entries, status)
        self._wrote(status)

    async def awrite(self, entries: list[Entry], status: str | None) -> None:
        """`write` from the event loop, with no thread of its own (`awrite`)."""
        status = self._writing(status)
        await awrite(self.store, self.keeper.lease, self.chain, entries, status)
        self._wrote(status)

    def _writing(self, status: str | None) -> str | None:
        parent = self.parent
        while parent is not None:
            parent.keeper.check()
            parent = parent.parent
        self.keeper.check()
        return "running" if status is None and self._status != "running" else status

    def _wrote(self, status: str | None) -> None:
        if status is not None:
            self.status = status
            self._status = status

    def journaled(self, machine: Machine[R], host: ToolHost, observed: bool = True) -> Machine[R]:
        self.hosting = bool(host.registry.hosted)
        nonce = self.meta.get("nonce") if self.chain is not None else None
        writer = _Writer(self)
        return journaled(machine, self.past, writer, host.registry, nonce or "", observed)

    def __enter__(self) -> Session:
        top = self._top()
        if top is None:  # renewed with every lease this process holds in the store
            self.keeper._start_shared()
        else:  # a sub-run: the keeper of the run at the top renews its lease too
            top.keeper.attach(self.keeper)
        return self

    def __exit__(self, *exc: object) -> None:
        top = self._top()
        if top is None:
            self.keeper.stop()
        else:
            top.keeper.detach(self.keeper)
        lease = self.keeper.lease
        if self.forget and self.status == "finished":  # still ours: nobody else can be in it
            if self.hosting:
                _forget_below(self.store, lease.run_id)
            self.store.delete(lease.run_id, force=True)
        else:
            self.store.release(lease)

    def _top(self) -> Session | None:
        """The session of the run at the top of this one's tree (`None`: this is it)."""
        top = self.parent
        while top is not None and top.parent is not None:
            top = top.parent
        return top

    async def __aenter__(self) -> Session:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        await _pool.through(self.__exit__)  # the lease is given back, even when cancelled


def append(
    store: RunStore,
    lease: Lease,
    chain: Chain | None,
    entries: list[Entry],
    status: str | None = None,
) -> list[JournalRecord]:
    """Append `entries` under `lease`, sealed into the run's checksum chain (if it has one).

    After a write that failed in a way that leaves it in doubt (a lost connection: it may
    have committed), the next one first reads what the journal holds past the chain."""
    if chain is None:
        return store.append_many(lease, entries, status=status)
    if chain.stale:
        chain.catch_up(store.read(lease.run_id, after=chain.seq))
    sealed, last = chain.seal(entries)
    try:
        written = store.append_many(lease, sealed, status=status)
    except (LeaseLost, JournalConflict):
        raise  # refused: nothing was written
    except BaseException:
        chain.stale = True
        raise
    chain.moved(last, written[-1].seq)
    return written


class _Writer:
    """A session's journal writes as the `Journal` effect carries them: called by the sync
    driver, `awrite` awaited by the asyncio one."""

    __slots__ = ("awrite", "write")

    def __init__(self, session: Session):
        self.write = session.write
        self.awrite = session.awrite

    def __call__(self, entries: list[Entry], status: str | None) -> None:
        self.write(entries, status)


def write(
    store: RunStore, lease: Lease, chain: Chain | None, entries: list[Entry], status: str | None
) -> None:
    """`append` for a writer that needs no records back: a live run's records are encoded
    once (the chain's text is the stored text, `Chain.encode`), and the store decodes
    nothing it just wrote."""
    if chain is not None and chain.stale:
        chain.catch_up(store.read(lease.run_id, after=chain.seq))
    encoded = _encoded(store, chain, entries)
    if encoded is None:
        append(store, lease, chain, entries, status)
        return
    assert chain is not None
    new, last = encoded
    try:
        seq = store._append_records(lease, new, None, status)  # type: ignore[attr-defined]
    except (LeaseLost, JournalConflict):
        raise  # refused: nothing was written
    except BaseException:
        chain.stale = True
        raise
    chain.moved(last, seq)


async def awrite(
    store: RunStore, lease: Lease, chain: Chain | None, entries: list[Entry], status: str | None
) -> None:
    """`write` from the event loop: the store's own async path when it has one (memory:
    inline; SQLite: its group commit; others: agentloops' pool for store I/O)."""
    encoded = None if chain is None or chain.stale else _encoded(store, chain, entries)
    if encoded is None:  # the general path, blocking: on the pool
        await _pool.call(write, store, lease, chain, entries, status, pool=_pool.own)
        return
    assert chain is not None
    new, last = encoded
    try:
        seq = await store._aappend_records(lease, new, None, status)  # type: ignore[attr-defined]
    except (LeaseLost, JournalConflict):
        raise
    except BaseException:  # cancelled too: the write may have committed
        chain.stale = True
        raise
    chain.moved(last, seq)


def _encoded(
    store: RunStore, chain: Chain | None, entries: list[Entry]
) -> tuple[list[NewRecord], str] | None:
    if chain is None or not getattr(store, "_takes_records", False):
        return None  # a format 1 journal, a store of the user's (or a subclass's own
    return chain.encode(entries)  # `append_many`): the public path


def begin(
    d: Durability,
    *,
    kind: str,
    run_id: str,
    meta: Mapping[str, Any],
    fingerprint: _fingerprint.Parts,
    parent: Session | None = None,
) -> Session:
    """Create the run, holding its lease (`RunExists` when the id is taken); its header
    keeps `meta`, the journal's format, a new nonce and the loop's `fingerprint`. With
    `parent`, a sub-run of that session's run, under its holder."""
    nonce = secrets.token_hex(6)
    full = {"format": FORMAT, "nonce": nonce, **meta}
    full["fingerprint"] = _fingerprint.condensed(fingerprint)
    holder = None if parent is None else parent.holder
    lease = d.store.start(run_id, kind=kind, ttl=d.lease_ttl, holder=holder, meta=full)
    return Session(d, lease, full, [], Chain(run_id, nonce), parent)


def reopen(
    d: Durability,
    *,
    kind: str,
    run_id: str,
    decisions: Decisions | None,
    fingerprint: _fingerprint.Parts,
    allow_changes: Collection[str] = (),
    parent: Session | None = None,
    alone: bool = False,
) -> Session:
    """Take the run's lease, check the loop against the run's fingerprint, record
    `decisions` under the lease (those for calls of its sub-runs in their journals), and
    read (and check) the journal. With `parent`, the run is that run's sub-run, reopened
    under its holder (waiting, at most one lease's time, for the lease of a holder that
    stopped to lapse); with `alone`, a sub-run journaled in its own loop's store (its
    parent has none), resumed by the call that made it.

    Raises:
        RunNotFound, RunLeased: no such run, or another holder drives it now.
        CheckpointError: the run is another loop's, from a newer agentloops, was started
            with other settings (that `allow_changes` does not name), its journal is
            damaged (a record that fails its schema or its checksum), or it is a sub-run
            resumed on its own (resume the run at the top).
        ConfigurationError: decisions that are not decisions, or leave a paused turn's call
            undecided; `DecisionRefused` for one naming no waiting call (in the run or the
            runs below it), contradicting a recorded one, or of the wrong kind (see
            `engine.decisions`).
    """
    store = d.store
    info = store.run_info(run_id)
    check_kind(info, kind, run_id)
    upgrade = _fingerprint.check(run_id, info.meta, fingerprint, allow_changes)
    top = info.meta.get("parent_run_id")
    if parent is None and not alone and info.meta.get("tool") and top:
        raise CheckpointError(
            f"run {run_id!r} is a sub-run of run {top!r} (its call "
            f"{info.meta.get('call_id')!r} of {info.meta['tool']!r}): resume {top!r}, which "
            "continues it",
            run_id=run_id,
        )
    if parent is None:
        lease = store.acquire(run_id, ttl=d.lease_ttl)
    else:
        lease = _acquire_below(store, run_id, d.lease_ttl, parent.holder)
    meta = dict(info.meta)
    try:
        chain = Chain.of(run_id, meta)
        past: list[JournalRecord] | Streamed
        own: dict[str, bool | str] = {}
        entries: list[Entry] = []
        if decisions:  # what they decide is checked against the whole journal
            whole = _records.checked(iter_records(store, run_id), chain)
            own = _record_below(store, run_id, whole, decisions, lease)
            entries = decision_entries(run_id, whole, own, by=lease.holder) if own else []
            past = whole
        else:  # replayed a page at a time
            past = Streamed.read(store, run_id, chain)
        decided = bool(entries) or len(own) < len(decisions or {})
        if upgrade is not None:
            meta["fingerprint"], changed = upgrade
            if changed:  # the journal says when, and by whom, the run's settings changed
                entries.append(("settings_changed", {"changed": changed, "by": lease.holder}))
            store.update_run(lease, meta=meta)
        if entries:
            # decisions recorded: the run goes on from here, its status "running" again
            past.extend(append(store, lease, chain, entries, "running" if decided else None))
    except BaseException:
        store.release(lease)
        raise
    status = "running" if decided else info.status
    return Session(d, lease, meta, past, chain, parent, status=status)


class Streamed:
    """A run's journal, checked, that is never held whole: read and checked once a page at
    a time when the run is opened (`read`: the checksum chain and each record's schema,
    kept as a `Scan`, what a replay must know before its machine starts, holding no
    record's body), then read again a page at a time as the replay consumes it (up to
    the record the first pass ended at, and the ones this session added since: `extend`)."""

    __slots__ = ("run_id", "scan", "store", "until")

    def __init__(self, store: RunStore, run_id: str, scan: Scan):
        self.store, self.run_id, self.scan = store, run_id, scan
        self.until = scan.last

    @classmethod
    def read(cls, store: RunStore, run_id: str, chain: Chain | None) -> Streamed:
        """The run's journal, checked (`CheckpointError` at its first bad record)."""
        scan = Scan()
        for _ in scan.read(_records.checking(iter_records(store, run_id), chain)):
            pass
        return cls(store, run_id, scan)

    def __iter__(self) -> Iterator[JournalRecord]:
        return iter_records(self.store, self.run_id, until=self.until)

    def extend(self, records: list[JournalRecord]) -> None:
        self.scan.add(records)  # a decision, a change of settings: no model call's
        self.until = self.scan.last


def streamed(store: RunStore, run_id: str, info: RunInfo | None = None) -> Streamed:
    """`read`, never holding the journal whole (`Streamed`)."""
    if info is None:
        info = store.run_info(run_id)
    return Streamed.read(store, run_id, Chain.of(run_id, info.meta))


def read(store: RunStore, run_id: str, info: RunInfo | None = None) -> list[JournalRecord]:
    """The run's journal, checked: its records' checksums and each one's schema."""
    if info is None:
        info = store.run_info(run_id)
    return _records.checked(store.read(run_id), Chain.of(run_id, info.meta))


def _acquire_below(store: RunStore, run_id: str, ttl: float, holder: str) -> Lease:
    """A sub-run's lease for its parent's holder. The parent's lease is held, so a lease
    still current here is one a holder that stopped took with the parent's: it lapses
    within about one lease's time, which is waited for."""
    waited, step = 0.0, ttl / 20
    while True:
        try:
            return store.acquire(run_id, ttl=ttl, holder=holder)
        except RunLeased:
            if waited >= ttl * 1.5:
                raise
            time.sleep(step)
            waited += step


def fork(
    d: Durability,
    *,
    kind: str,
    run_id: str,
    new_run_id: str,
    at: int,
    replace: Replacement | None,
    fingerprint: _fingerprint.Parts,
) -> Session:
    """Start the run `new_run_id` as a fork of `run_id` at record `at` (`engine.fork`),
    holding its lease, its copied journal written; the source is only read (and checked:
    its chain and schemas up to `at`). The copied records are re-chained: sealed from the
    fork's own seed (its id and a new nonce), as the fork's journal format 2 says.

    Raises:
        RunNotFound: no run `run_id`; RunExists: `new_run_id` is taken.
        CheckpointError: the source is another loop's, from a newer agentloops, was
            started with other settings than this loop's `fingerprint`, or is damaged.
        ConfigurationError: `at` or `replace` does not fit the source's journal.
    """
    store = d.store
    info = store.run_info(run_id)
    check_kind(info, kind, run_id)
    _fingerprint.check(run_id, info.meta, fingerprint, ())
    limit = at if type(at) is int and at > 0 else None
    past = _records.checked(store.read(run_id, limit=limit), Chain.of(run_id, info.meta))
    entries = fork_entries(past, source=run_id, new=new_run_id, at=at, replace=replace)
    nonce = secrets.token_hex(6)
    source = {k: v for k, v in info.meta.items() if k not in ("format", "nonce", "fingerprint")}
    meta = fork_meta(source, source=run_id, at=at, replaced=replace is not None)
    meta = {"format": FORMAT, "nonce": nonce, **meta}
    meta["fingerprint"] = _fingerprint.condensed(fingerprint)
    lease = store.start(new_run_id, kind=kind, ttl=d.lease_ttl, meta=meta)
    chain = Chain(new_run_id, nonce)
    try:
        written = append(store, lease, chain, entries) if entries else []
    except BaseException:
        store.release(lease)
        raise
    return Session(d, lease, meta, written, chain)


def waiting(past: list[JournalRecord]) -> dict[str, tuple[str, str, ToolCall]]:
    """The calls a run waits on a person for, by call id: `(why, journal key, call)`, why
    being "approval" (a paused turn's call with no decision yet) or "doubt" (a call that
    started and never finished, and no one has decided yet whether it runs again). A
    call that is a sub-run is not listed: the calls its run waits for are
    (`waiting_below`).

    Raises:
        CheckpointError: a record in `past` that fails its kind's schema.
    """
    for record in past:
        _records.check(record)
    return {c: (w.why, w.key, w.call) for c, w in pending(past).items()}


def open_subruns(past: list[JournalRecord], *, finished: bool = False) -> list[str]:
    """The run ids of the sub-runs a run started and has no outcome of yet (paused, in
    doubt, or cut off), in the order they started; with `finished`, every one."""
    ended = set() if finished else {r.key for r in past if r.kind == "tool_finished"}
    return [
        r.data["subrun"]
        for r in past
        if r.kind == "tool_started" and "subrun" in r.data and r.key not in ended
    ]


def _forget_below(store: RunStore, run_id: str) -> None:
    """Delete the sub-runs below a finished run (a loop's private store keeps none of a
    finished tree: the run at the top forgets it all)."""
    try:
        past = store.read(run_id)
    except StoreError:  # pragma: no cover  (the run is ours while it is forgotten)
        return
    for sub_id in open_subruns(past, finished=True):
        _forget_below(store, sub_id)
        store.delete(sub_id, force=True)


def _decided_below(
    store: RunStore, past: list[JournalRecord], call_id: str, kind: str
) -> list[bool]:
    """The decisions of `kind` ("decision" or `DOUBT`) recorded for a call of this id in
    the runs below (finished ones too)."""
    found: list[bool] = []
    for sub_id in open_subruns(past, finished=True):
        try:
            sub_past = read(store, sub_id)
        except StoreError:
            continue
        found += [
            bool(r.data["approved"])
            for r in sub_past
            if r.kind == kind and r.key and r.key.endswith(f":{call_id}")
        ]
        found += _decided_below(store, sub_past, call_id, kind)
    return found


def waiting_below(
    store: RunStore, run_id: str, past: list[JournalRecord] | None = None
) -> dict[str, tuple[str, str, ToolCall, tuple[str, ...]]]:
    """What a run and the sub-runs below it wait on a person for, by call id: `(why, key,
    call, path)`, `path` being the run ids from `run_id` down to the run the call
    belongs to (a call id that waits in two runs is listed as `RUN_ID:CALL_ID`)."""
    if past is None:
        past = read(store, run_id)
    found: dict[str, tuple[str, str, ToolCall, tuple[str, ...]]] = {
        cid: (*w, (run_id,)) for cid, w in waiting(past).items()
    }
    for sub_id in open_subruns(past):
        try:
            below = waiting_below(store, sub_id)
        except StoreError:  # started, never begun (the parent stopped in between)
            continue
        for cid, (why, key, call, path) in below.items():
            name = f"{path[-1]}:{cid}" if cid in found else cid
            found[name] = (why, key, call, (run_id, *path))
    return found


def _record_below(
    store: RunStore,
    run_id: str,
    past: list[JournalRecord],
    decisions: Decisions,
    lease: Lease,
) -> dict[str, bool | str]:
    """Record the decisions for calls of the run's sub-runs in the journals of the runs
    they belong to (each under its own lease, taken by the same holder, and every one
    checked by `engine.decisions` before any is written); the decisions for the run's own
    calls (and for unknown ones, for `decision_entries` to refuse) are returned."""
    if not open_subruns(past, finished=True):
        return dict(decisions)
    own_calls = waiting(past)
    found = waiting_below(store, run_id, past)
    leaves = {(path[-1], call.id): path for _, _, call, path in found.values()}
    own: dict[str, bool | str] = {}
    below: dict[str, dict[str, bool | str]] = {}
    for name, value in decisions.items():
        entry = found.get(name)
        if name in own_calls:
            own[name] = value
            continue
        if entry is None:
            choice = choice_of(value, name)
            kind = "decision" if choice in APPROVAL_CHOICES else DOUBT
            earlier = _decided_below(store, past, name.rsplit(":", 1)[-1], kind)
            approved = choice in ("approve", "rerun")
            if earlier and all(e == approved for e in earlier):
                continue  # decided so already (a second approver, a retry): nothing to add
            if earlier:
                raise DecisionRefused(
                    f"call {name} below run {run_id!r} was already decided; a decision is final",
                    run_id=run_id,
                    call_id=name,
                )
        if entry is None and ":" not in name:
            own[name] = value
            continue
        if entry is not None:
            leaf, call_id = entry[3][-1], entry[2].id
        else:  # "RUN_ID:CALL_ID", the long form of a call of a run below
            leaf, call_id = name.rsplit(":", 1)
            if (leaf, call_id) not in leaves:
                own[name] = value
                continue
        below.setdefault(leaf, {})[call_id] = value
    unknown = [name for name in own if name not in own_calls]
    if unknown and found:  # refused before any is recorded, naming what waits below
        raise DecisionRefused(
            f"run {run_id!r} has no call {unknown[0]!r} waiting for a decision; "
            f"waiting: {sorted(found)}",
            run_id=run_id,
            call_id=unknown[0],
        )
    held: list[tuple[Lease, Chain | None, list[Entry]]] = []
    try:
        for leaf, leaf_decisions in below.items():
            leaf_lease = _acquire_below(store, leaf, lease.ttl, lease.holder)
            chain = Chain.of(leaf, store.run_info(leaf).meta)
            held.append((leaf_lease, chain, []))
            leaf_past = _records.checked(store.read(leaf), chain)
            held[-1][2].extend(decision_entries(leaf, leaf_past, leaf_decisions, by=lease.holder))
        for leaf_lease, chain, entries in held:  # all checked: now recorded
            if entries:
                append(store, leaf_lease, chain, entries)
    finally:
        for leaf_lease, _, _ in held:
            store.release(leaf_lease)
    return own


class _Plain:
    """A run that is not durable: nothing journaled, no lease (a `Hold` like `Session`)."""

    __slots__ = ("meta",)

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}  # a plain run keeps nothing with it

    def journaled(self, machine: Machine[R], host: ToolHost, observed: bool = True) -> Machine[R]:
        return machine

    def __enter__(self) -> _Plain:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    async def __aenter__(self) -> _Plain:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


def plain() -> Hold:
    """The opener of a run with no store."""
    return _Plain()


def check_kind(info: RunInfo, kind: str, run_id: str) -> None:
    """Refuse a run of another loop, or one journaled in a newer format."""
    version = info.meta.get("format")
    if info.kind != kind:
        raise CheckpointError(f"run {run_id!r} is a {info.kind} run, not {kind}", run_id=run_id)
    if not isinstance(version, int) or version > FORMAT:
        raise CheckpointError(
            f"run {run_id!r} was journaled in format {version!r}; this agentloops reads up "
            f"to {FORMAT}: upgrade agentloops to resume it",
            run_id=run_id,
        )
