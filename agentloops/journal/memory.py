"""`MemoryStore`: the run store in this process's memory, for tests and single-process runs.

Records are kept as JSON text, so a read never aliases what was appended, and every
method holds one lock, so threads see the same lease rules the SQL stores enforce.

Rule: a backend knows `records` and `_base`, never the journal's facade, a driver or a loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentloops.errors import LeaseLost, RunExists
from agentloops.journal._base import (
    NewRecord,
    StoreBase,
    bounded,
    check_after,
    check_after_arg,
    check_limit,
    fence,
    key_taken,
    leased,
    not_found,
    record,
    run_info,
    utc,
    utc_or_none,
)
from agentloops.journal.follow import Wakeup
from agentloops.journal.records import JournalRecord, Lease, RunInfo

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.journal.tool_results import MemoryResults


@dataclass
class _Run:
    kind: str
    status: str
    meta: str
    created_at: float
    updated_at: float
    holder: str | None
    expires_at: float | None
    epoch: int
    ttl: float | None = None
    """The current lease's ttl: how far ahead of the clock its expiry may be (`bounded`)."""
    records: list[tuple[str, str | None, str, float]] = field(default_factory=list)
    """(kind, key, data, at) per record; seq is the index + 1."""
    keys: dict[tuple[str, str], int] = field(default_factory=dict)
    """(kind, key) to seq, for keyed records."""


class MemoryStore(StoreBase):
    """A `RunStore` in a dict: thread-safe, gone with the process.

    Args:
        clock: seconds since the epoch, as `time.time` (the default) gives them; a test
            may pass its own to move leases past their expiry without sleeping. Leases are
            judged by it, with a bound: an expiry more than its lease's ttl ahead counts
            as ttl from when the run is next acquired (the clock was set back).

    Examples:
        >>> store = MemoryStore()
        >>> lease = store.start("r1", kind="react", ttl=30)
        >>> store.append(lease, "model", {"text": "hi"}).seq
        1
        >>> [r.kind for r in store.read("r1")]
        ['model']
    """

    def __init__(self, *, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()
        self._results: MemoryResults | None = None
        self._followers: dict[str, set[Wakeup]] = {}
        """The followers of each run, woken by every append to it and by its deletion."""

    def tool_results(self) -> MemoryResults:
        """The tool results a `ToolCache(store=...)` keeps with this store (in memory)."""
        if self._results is None:
            from agentloops.journal.tool_results import MemoryResults

            self._results = MemoryResults()
        return self._results

    def _wake(self, run_id: str) -> None:
        for wakeup in self._followers.get(run_id, ()):
            wakeup.set()

    def _fenced(self, lease: Lease, now: float) -> _Run:
        run = self._runs.get(lease.run_id)
        if (
            run is not None
            and run.epoch == lease.epoch
            and run.holder is not None
            and run.expires_at is not None
            and run.expires_at > now
        ):
            return run  # current: what `fence` would say, without its datetimes
        current = None if run is None else (run.holder, run.epoch, utc_or_none(run.expires_at))
        fence(lease, current, utc(now))
        assert run is not None  # fence raised otherwise
        return run

    def _start(
        self, run_id: str, *, kind: str, ttl: float, holder: str, meta: str, status: str
    ) -> Lease:
        with self._lock:
            if run_id in self._runs:
                raise RunExists(f"run {run_id!r} exists already", run_id=run_id)
            now = self._clock()
            self._runs[run_id] = _Run(kind, status, meta, now, now, holder, now + ttl, 1, ttl)
            return Lease(run_id=run_id, holder=holder, epoch=1, ttl=ttl, expires_at=utc(now + ttl))

    def _acquire(self, run_id: str, *, ttl: float, holder: str) -> Lease:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise not_found(run_id)
            now = self._clock()
            run.expires_at = bounded(run.expires_at, run.ttl, now)  # kept: it counts from now
            if run.holder is not None and run.expires_at is not None and run.expires_at > now:
                raise leased(run_id, run.holder, utc(run.expires_at))
            run.holder, run.expires_at, run.epoch = holder, now + ttl, run.epoch + 1
            run.updated_at, run.ttl = now, ttl
            return Lease(
                run_id=run_id, holder=holder, epoch=run.epoch, ttl=ttl, expires_at=utc(now + ttl)
            )

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        with self._lock:  # re-entrant: `_renew_many` holds it
            now = self._clock()
            run = self._fenced(lease, now)
            run.expires_at, run.ttl = now + ttl, ttl
            return Lease(
                run_id=lease.run_id,
                holder=lease.holder,
                epoch=lease.epoch,
                ttl=ttl,
                expires_at=utc(now + ttl),
            )

    def _renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        with self._lock:  # one lock for all: renewed as one write
            return super()._renew_many(leases)

    def release(self, lease: Lease) -> bool:
        with self._lock:
            run = self._runs.get(lease.run_id)
            now = self._clock()
            if (
                run is None
                or run.epoch != lease.epoch
                or run.expires_at is None
                or run.expires_at <= now
            ):
                return False
            run.holder = run.expires_at = None
            run.updated_at = now
            return True

    def _break(self, run_id: str) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise not_found(run_id)
            if run.holder is None:
                return False
            run.holder = run.expires_at = run.ttl = None
            run.epoch += 1
            run.updated_at = self._clock()
            return True

    def _update(self, lease: Lease, status: str | None, meta: str | None) -> RunInfo:
        with self._lock:
            now = self._clock()
            run = self._fenced(lease, now)
            run.status = run.status if status is None else status
            run.meta = run.meta if meta is None else meta
            run.updated_at = now
            return self._info(lease.run_id, run, now)

    def _append(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[JournalRecord]:
        with self._lock:
            last = self._insert(lease, new, after, status) - len(new)
            run = self._runs[lease.run_id]
            return [
                self._record(lease.run_id, run, seq)
                for seq in range(last + 1, len(run.records) + 1)
            ]

    def _append_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        with self._lock:
            return self._insert(lease, new, after, status)

    async def _aappend_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        return self._append_records(lease, new, after, status)  # a list under a lock: inline

    def _insert(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        """Append under the lock, fenced; the last seq."""
        now = self._clock()
        run = self._fenced(lease, now)
        last = len(run.records)
        check_after(lease.run_id, after, last)
        for entry in new:
            seq = None if entry.key is None else run.keys.get((entry.kind, entry.key))
            if seq is not None:
                raise key_taken(self._record(lease.run_id, run, seq), last)
        for entry in new:
            run.records.append((entry.kind, entry.key, entry.data, now))
            if entry.key is not None:
                run.keys[(entry.kind, entry.key)] = len(run.records)
        run.updated_at = now
        run.status = run.status if status is None else status
        self._wake(lease.run_id)
        return len(run.records)

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[JournalRecord]:
        start = check_after_arg(after) or 0
        most = check_limit(limit)
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise not_found(run_id)
            end = len(run.records) if most is None else min(len(run.records), start + most)
            return [self._record(run_id, run, seq) for seq in range(start + 1, end + 1)]

    def _source(self, run_id: str) -> _Follower:
        return _Follower(self, run_id, Wakeup())

    def _asource(self, run_id: str) -> _AsyncFollower:
        return _AsyncFollower(_Follower(self, run_id, Wakeup(asyncio.get_running_loop())))

    def _watch(self, run_id: str, wakeup: Wakeup, on: bool) -> None:
        with self._lock:
            followers = self._followers.setdefault(run_id, set())
            if on:
                followers.add(wakeup)
            else:
                followers.discard(wakeup)
                if not followers:
                    del self._followers[run_id]

    def find(self, run_id: str, *, kind: str, key: str) -> JournalRecord | None:
        with self._lock:
            run = self._runs.get(run_id)
            seq = None if run is None else run.keys.get((kind, key))
            return None if run is None or seq is None else self._record(run_id, run, seq)

    def run_info(self, run_id: str) -> RunInfo:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise not_found(run_id)
            return self._info(run_id, run, self._clock())

    def list_runs(self, *, status: str | None = None, kind: str | None = None) -> list[RunInfo]:
        with self._lock:
            now = self._clock()
            runs = sorted(self._runs.items(), key=lambda item: (item[1].created_at, item[0]))
            return [
                self._info(run_id, run, now)
                for run_id, run in runs
                if (status is None or run.status == status) and (kind is None or run.kind == kind)
            ]

    def delete(self, run_id: str, *, force: bool = False) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return False
            expires = run.expires_at
            if (
                not force
                and run.holder is not None
                and expires is not None
                and expires > self._clock()
            ):
                raise leased(run_id, run.holder, utc(expires))
            del self._runs[run_id]
            self._wake(run_id)
            return True

    @staticmethod
    def _record(run_id: str, run: _Run, seq: int) -> JournalRecord:
        kind, key, data, at = run.records[seq - 1]
        return record(run_id, seq, kind, key, data, utc(at))

    @staticmethod
    def _info(run_id: str, run: _Run, now: float) -> RunInfo:
        row = (run_id, run.kind, run.status, run.meta, run.created_at, run.updated_at)
        lease = (run.holder, run.expires_at, run.epoch, len(run.records), now)
        return run_info(row + lease, utc_or_none)


class _Follower:
    """A follower's source: pages through `read`, woken by the store (`follow.Source`)."""

    def __init__(self, store: MemoryStore, run_id: str, wakeup: Wakeup):
        self.store, self.run_id, self.wakeup = store, run_id, wakeup
        store._watch(run_id, wakeup, True)  # before the first read: no append slips between

    def page(self, after: int, limit: int) -> list[JournalRecord]:
        return self.store.read(self.run_id, after=after, limit=limit)

    def wait(self, timeout: float | None) -> None:
        self.wakeup.wait(timeout)

    def close(self) -> None:
        self.store._watch(self.run_id, self.wakeup, False)


class _AsyncFollower:
    """`_Follower` on the event loop (a read is a dict lookup under a lock: done inline)."""

    def __init__(self, follower: _Follower):
        self.follower = follower

    async def page(self, after: int, limit: int) -> list[JournalRecord]:
        return self.follower.page(after, limit)

    async def wait(self, timeout: float | None) -> None:
        await self.follower.wakeup.await_(timeout)

    async def close(self) -> None:
        self.follower.close()
