"""A durable run's hold on its store: the lease and its keeper, the writes that name it,
and the approvals recorded under it.

A run is driven by one holder at a time. `begin` creates the run holding its lease (its
header keeps the journal's format, the run's nonce and the loop's fingerprint); `reopen`
takes the lease of an existing run (`RunLeased`, naming the holder and until when, while
another holder drives it), checks the loop's fingerprint, records the decisions it was
given (checked by `engine.decisions`), and reads and checks the journal to replay. Every
journal write names the lease, so a holder that lost it (it stalled past the expiry and
the run was taken over) writes nothing and stops, and every record it writes is sealed
into the run's checksum chain.

Rule: this module holds runs, it does not drive them (`agentloops.engine.runner` does),
and knows no loop.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agentloops import _pool
from agentloops.engine import _fingerprint, _records
from agentloops.engine._chain import Chain
from agentloops.engine.decisions import Decisions, decision_entries, pending
from agentloops.engine.durable import FORMAT, journaled
from agentloops.engine.effects import Machine, R
from agentloops.engine.fork import Replacement, fork_entries, fork_meta
from agentloops.engine.host import ToolHost
from agentloops.errors import CheckpointError, ConfigurationError, JournalConflict, LeaseLost
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
        past: list[JournalRecord],
        chain: Chain | None,
        *,
        status: str = "running",
    ):
        self.store = d.store
        self.forget = d.forget_finished
        self.meta = meta
        self.past = past
        self.status: str | None = None
        """The status this session last wrote."""
        self.chain = chain
        """Where the run's checksum chain stands (`None`: a format 1 journal has none)."""
        self._status = status
        """The header's status as this holder last set it (or found it, when reopening)."""
        from agentloops.journal.keeper import LeaseKeeper  # with the first durable run

        self.keeper = LeaseKeeper(d.store, lease)

    def write(self, entries: list[Entry], status: str | None) -> None:
        """Append under the lease (fenced: `LeaseLost` if it is no longer ours). The first
        write of a reopened run that goes on sets its status back to "running", so a crash
        from here on does not leave it saying "paused", "in_doubt" or "failed"."""
        self.keeper.check()
        if status is None and self._status != "running":
            status = "running"
        append(self.store, self.keeper.lease, self.chain, entries, status)
        if status is not None:
            self.status = status
            self._status = status

    def journaled(self, machine: Machine[R], host: ToolHost, observed: bool = True) -> Machine[R]:
        nonce = self.meta.get("nonce") if self.chain is not None else None
        return journaled(machine, self.past, self.write, host.registry, nonce or "", observed)

    def __enter__(self) -> Session:
        self.keeper.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.keeper.stop()
        lease = self.keeper.lease
        if self.forget and self.status == "finished":  # still ours: nobody else can be in it
            self.store.delete(lease.run_id, force=True)
        else:
            self.store.release(lease)

    async def __aenter__(self) -> Session:
        self.keeper.start()
        return self

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


def begin(
    d: Durability,
    *,
    kind: str,
    run_id: str,
    meta: Mapping[str, Any],
    fingerprint: _fingerprint.Parts,
) -> Session:
    """Create the run, holding its lease (`RunExists` when the id is taken); its header
    keeps `meta`, the journal's format, a new nonce and the loop's `fingerprint`."""
    nonce = secrets.token_hex(6)
    full = {"format": FORMAT, "nonce": nonce, **meta}
    full["fingerprint"] = _fingerprint.condensed(fingerprint)
    lease = d.store.start(run_id, kind=kind, ttl=d.lease_ttl, meta=full)
    return Session(d, lease, full, [], Chain(run_id, nonce))


def reopen(
    d: Durability,
    *,
    kind: str,
    run_id: str,
    decisions: Decisions | None,
    fingerprint: _fingerprint.Parts,
    allow_changes: Collection[str] = (),
) -> Session:
    """Take the run's lease, check the loop against the run's fingerprint, record
    `decisions` under the lease, and read (and check) the journal.

    Raises:
        RunNotFound, RunLeased: no such run, or another holder drives it now.
        CheckpointError: the run is another loop's, from a newer agentloops, was started
            with other settings (that `allow_changes` does not name), or its journal is
            damaged (a record that fails its schema or its checksum).
        ConfigurationError: decisions that are not decisions, or leave a paused turn's call
            undecided; `DecisionRefused` for one naming no waiting call, contradicting a
            recorded one, or of the wrong kind (see `engine.decisions`).
    """
    store = d.store
    info = store.run_info(run_id)
    check_kind(info, kind, run_id)
    upgrade = _fingerprint.check(run_id, info.meta, fingerprint, allow_changes)
    lease = store.acquire(run_id, ttl=d.lease_ttl)
    meta = dict(info.meta)
    try:
        chain = Chain.of(run_id, meta)
        past = _records.checked(store.read(run_id), chain)
        entries = decision_entries(run_id, past, decisions, by=lease.holder) if decisions else []
        decided = bool(entries)
        if upgrade is not None:
            meta["fingerprint"], changed = upgrade
            if changed:  # the journal says when, and by whom, the run's settings changed
                entries.append(("settings_changed", {"changed": changed, "by": lease.holder}))
            store.update_run(lease, meta=meta)
        if entries:
            # decisions recorded: the run goes on from here, its status "running" again
            past += append(store, lease, chain, entries, "running" if decided else None)
    except BaseException:
        store.release(lease)
        raise
    return Session(d, lease, meta, past, chain, status="running" if decided else info.status)


def read(store: RunStore, run_id: str, info: RunInfo) -> list[JournalRecord]:
    """The run's journal, checked: its records' checksums and each one's schema."""
    return _records.checked(store.read(run_id), Chain.of(run_id, info.meta))


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
    started and never finished, and no one has decided yet whether it runs again).

    Raises:
        CheckpointError: a record in `past` that fails its kind's schema.
    """
    for record in past:
        _records.check(record)
    return {c: (w.why, w.key, w.call) for c, w in pending(past).items()}


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
