"""The run store's records and its protocol: what a driver and every backend share.

`JournalRecord`, `Lease`, `RunInfo`, the `Entry` a driver appends, and the `RunStore`
Protocol the backends implement. Rule: records only; no backend, no driver (the backends
and `agentloops.engine` import this module, never the package's `__init__`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

Entry = tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], str | None]
"""One record to append: `(kind, data)` or `(kind, data, key)`."""

DRIVE_ENDS = frozenset({"result", "failed"})
"""The kinds of record a durable driver writes last in a drive: `"result"` (the run
finished or paused for approval) and `"failed"` (it failed, or stopped at a call in
doubt). `follow` ends after one of them when nothing follows it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalRecord:
    """One journaled outcome."""

    run_id: str
    seq: int
    """Its place in the run's journal: 1, 2, 3, ... with no gaps."""
    kind: str
    """What it records (`"model"`, `"tool_finished"`, `"decision"`, ...): an open string."""
    data: dict[str, Any]
    """The outcome, a JSON object; a fresh copy on every read, with its key order kept."""
    key: str | None = None
    """Unique per run and kind when set (a call id): the store refuses a second record."""
    at: datetime
    """When it was appended (UTC, by the store's clock)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """The right to drive one run until `expires_at`; every write names it."""

    run_id: str
    holder: str
    """Who holds it; by default `host:pid:random`, unique per `acquire` call."""
    epoch: int
    """The fencing token: each acquisition of the run increments it, renewals keep it."""
    ttl: float
    """Seconds a renewal extends it by."""
    expires_at: datetime
    """When it lapses unless renewed (UTC, by the store's clock, not the caller's). A
    store whose clock is its writers' (memory, SQLite) counts an expiry more than `ttl`
    ahead of its clock as `ttl` from when it is next judged (a clock that ran ahead)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    """A run's header, as operators see it."""

    run_id: str
    kind: str
    """What drives it (`"react"`, `"rewoo"`, ...): set at `start`, never changed."""
    status: str
    """An open string: `"running"`, `"paused"`, `"finished"`, `"failed"`, ..."""
    meta: dict[str, Any]
    """A small JSON object the driver keeps with the header (task, settings, ...)."""
    created_at: datetime
    updated_at: datetime
    """The later of the last header change and the last append."""
    holder: str | None
    """The holder of the last lease; `None` once released. See `leased`."""
    lease_expires_at: datetime | None
    epoch: int
    """How many times the run was acquired (the last lease's fencing token)."""
    last_seq: int
    """The journal's last sequence number (0 for an empty journal)."""
    leased: bool
    """Whether `holder` holds a lease that had not expired when this was read."""


@runtime_checkable
class RunStore(Protocol):
    """An append-only journal per run, with a small header, driven under a fenced lease.

    Every method is thread-safe. Writes that name a `Lease` check, in the same
    transaction, that it is still the run's current lease (same epoch, not expired, by
    the store's clock), and raise `LeaseLost` writing nothing otherwise. Storage
    failures raise `StoreError` with the cause chained; after one raised by a write,
    the write may or may not have happened (read the journal, or append with `after=`).
    """

    def start(
        self,
        run_id: str,
        *,
        kind: str,
        ttl: float,
        holder: str | None = None,
        meta: Mapping[str, Any] | None = None,
        status: str = "running",
    ) -> Lease:
        """Create the run with an empty journal, held by `holder` (epoch 1).

        Raises `RunExists` when the id is taken.
        """
        ...

    def acquire(self, run_id: str, *, ttl: float, holder: str | None = None) -> Lease:
        """Take the run's lease for `ttl` seconds when it is free or expired (a take-over).

        Raises `RunLeased` (naming the holder and its expiry) while another lease is current,
        even one with the same holder id, and `RunNotFound` for an unknown run.
        """
        ...

    def renew(self, lease: Lease, *, ttl: float | None = None) -> Lease:
        """Extend a current lease to now + `ttl` (default: `lease.ttl`); same epoch.

        Raises `LeaseLost` for a lease that expired, even if nobody took the run over.
        """
        ...

    def release(self, lease: Lease) -> bool:
        """Free the run now, if `lease` is still current; `False` when it was not (no error,
        so a `finally:` release never hides the failure that got there)."""
        ...

    def break_lease(self, run_id: str) -> bool:
        """Free the run now, whoever holds it (an operator's action), fenced like a
        take-over: the epoch moves on, so the holder's next write raises `LeaseLost`.

        Returns `False` when no one held the run (nothing changes then). Raises
        `RunNotFound` for an unknown run.
        """
        ...

    def append(
        self,
        lease: Lease,
        kind: str,
        data: Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
        after: int | None = None,
        status: str | None = None,
    ) -> JournalRecord:
        """Append one record under `lease`; see `append_many`."""
        ...

    def append_many(
        self,
        lease: Lease,
        entries: Sequence[Entry],
        *,
        after: int | None = None,
        status: str | None = None,
    ) -> list[JournalRecord]:
        """Append records in one transaction: all of them or none.

        Args:
            lease: the current lease (`LeaseLost` otherwise).
            entries: `(kind, data)` or `(kind, data, key)` tuples. A keyed record is unique
                per run and kind: a second one raises `JournalConflict` whose `.record` is
                the first.
            after: compare-and-append: the sequence number the caller last saw; the append
                raises `JournalConflict` unless the journal still ends there.
            status: set the run's status in the same transaction (e.g. "finished" with
                the final record).
        """
        ...

    def update_run(
        self,
        lease: Lease,
        *,
        status: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> RunInfo:
        """Change the header under `lease`: `status`, and `meta` (replaced whole)."""
        ...

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[JournalRecord]:
        """The run's records with `seq > after`, in order, at most `limit` of them (a page).
        `RunNotFound` for an unknown run."""
        ...

    def follow(
        self, run_id: str, *, after: int = 0, timeout: float | None = None
    ) -> Iterator[JournalRecord]:
        """The run's records with `seq > after` as they are appended, by any process or
        store object, ending after the record that ends a drive (`DRIVE_ENDS`) when nothing
        follows it. `timeout`: the longest wait for a new record (`TimeoutError` after it);
        `None` waits as long as it takes. `RunNotFound` for an unknown or deleted run.
        Closing the iterator early frees what the follower holds (its connection)."""
        ...

    def afollow(
        self, run_id: str, *, after: int = 0, timeout: float | None = None
    ) -> AsyncIterator[JournalRecord]:
        """`follow` on the event loop: waiting never blocks it."""
        ...

    def find(self, run_id: str, *, kind: str, key: str) -> JournalRecord | None:
        """The record of `kind` with `key` (e.g. the decision on a call id), or `None` (also
        for an unknown run)."""
        ...

    def run_info(self, run_id: str) -> RunInfo:
        """The run's header and lease. `RunNotFound` for an unknown run."""
        ...

    def list_runs(self, *, status: str | None = None, kind: str | None = None) -> list[RunInfo]:
        """Every run (optionally of one status or kind), oldest first."""
        ...

    def delete(self, run_id: str, *, force: bool = False) -> bool:
        """Forget the run and its journal; `False` for an unknown run.

        Raises `RunLeased` while a lease is current, unless `force` (its holder's next write
        then raises `LeaseLost`).
        """
        ...
