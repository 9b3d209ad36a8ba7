"""What every run store shares: argument checks, JSON coding, and the lease rules' errors.

The backends differ in how they lock and where their clock is; the decisions (is this
lease current, who holds this run, what to say about it) are made here, once.

Rule: what the backends share; it knows the records and errors, and no driver or loop.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from agentloops import _pool
from agentloops.errors import (
    ConfigurationError,
    JournalConflict,
    LeaseLost,
    RunLeased,
    RunNotFound,
    StoreError,
)
from agentloops.journal.records import Entry, JournalRecord, Lease, RunInfo, RunStore

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.journal.follow import AsyncSource, Source

SCHEMA_VERSION = 1
"""The table layout `PostgresStore` writes (row `journal` of `agentloops_schema`); each SQL
store passes its own to `check_schema`."""


def new_holder() -> str:
    """A holder id unique to this call: `host:pid:random`, so an operator can find it."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{what} must be a non-empty string, got {value!r}")
    return value


def check_ttl(ttl: object) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
        raise ConfigurationError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def encode(run_id: str, what: str, data: Mapping[str, Any] | None) -> str:
    """`data` as compact JSON text; anything that is not a JSON object is a `StoreError`."""
    if data is None:
        return "{}"
    if not isinstance(data, Mapping):
        raise StoreError(
            f"run {run_id!r}: {what} must be a JSON object, got {data!r}", run_id=run_id
        )
    try:
        text = json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"run {run_id!r}: {what} is not JSON: {exc}", run_id=run_id) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: stored as a \ud800 escape, read back as it was
        text = json.dumps(data, separators=(",", ":"))
    return text


def decode(run_id: str, text: object) -> dict[str, Any]:
    """A stored JSON object; text that is not one means the store is corrupted."""
    try:
        value = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"run {run_id!r}: a stored record is corrupted ({exc})", run_id=run_id
        ) from exc
    if not isinstance(value, dict):
        raise StoreError(f"run {run_id!r}: a stored record is not a JSON object", run_id=run_id)
    return value


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def utc_or_none(seconds: float | None) -> datetime | None:
    return None if seconds is None else utc(seconds)


@dataclass(frozen=True, slots=True)
class NewRecord:
    """An entry checked and encoded, ready to store."""

    kind: str
    data: str
    key: str | None


def prepare(run_id: str, entries: Sequence[Entry]) -> list[NewRecord]:
    """Check and encode `append_many`'s entries; a key repeated within them is a mistake."""
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence) or not entries:
        raise ConfigurationError(f"entries must be a non-empty sequence, got {entries!r}")
    prepared: list[NewRecord] = []
    keys: set[tuple[str, str]] = set()
    for entry in entries:
        if not isinstance(entry, tuple) or len(entry) not in (2, 3):
            raise ConfigurationError(
                f"an entry is (kind, data) or (kind, data, key), got {entry!r}"
            )
        kind = check_name("kind", entry[0])
        key = entry[2] if len(entry) == 3 else None
        if key is not None:
            check_name("key", key)
            if (kind, key) in keys:
                raise ConfigurationError(f"entries repeat kind {kind!r} with key {key!r}")
            keys.add((kind, key))
        prepared.append(
            NewRecord(kind, encode(run_id, f"the data of a {kind!r} record", entry[1]), key)
        )
    return prepared


def record(
    run_id: str, seq: int, kind: str, key: str | None, data: object, at: datetime
) -> JournalRecord:
    return JournalRecord(
        run_id=run_id, seq=seq, kind=kind, key=key, data=decode(run_id, data), at=at
    )


def not_found(run_id: str) -> RunNotFound:
    return RunNotFound(f"no run {run_id!r} in the store", run_id=run_id)


def leased(run_id: str, holder: str, until: datetime) -> RunLeased:
    return RunLeased(
        f"run {run_id!r} is leased by {holder!r} until {until.isoformat()}",
        run_id=run_id,
        holder=holder,
        until=until,
    )


def fence(
    lease: Lease, current: tuple[str | None, int, datetime | None] | None, now: datetime
) -> None:
    """Raise `LeaseLost` unless `lease` is the run's current lease at `now`.

    `current` is the run's (holder, epoch, expires_at), or `None` for a deleted run.
    """
    lost = f"run {lease.run_id!r}: the lease of {lease.holder!r} (epoch {lease.epoch})"
    if current is None:
        reason = f"{lost} is gone: the run was deleted"
    else:
        holder, epoch, expires_at = current
        if epoch != lease.epoch and holder is None:
            reason = f"{lost} was lost: its lease was broken, or the run taken over (epoch {epoch})"
        elif epoch != lease.epoch:
            reason = f"{lost} was lost: {holder!r} took the run over (epoch {epoch})"
        elif holder is None or expires_at is None:
            reason = f"{lost} was released"
        elif expires_at <= now:
            reason = f"{lost} expired at {expires_at.isoformat()}"
        else:
            return
    raise LeaseLost(
        reason + "; nothing was written",
        run_id=lease.run_id,
        holder=lease.holder,
        epoch=lease.epoch,
    )


def bounded(expires_at: float | None, ttl: float | None, now: float) -> float | None:
    """The expiry a lease is judged by, on a store whose clock is its writers' (memory,
    SQLite). An expiry more than the lease's `ttl` ahead of `now` was set by a clock that
    ran ahead of this one, or before this one was set back: it counts as `now + ttl`, so
    the lease of a holder that died lapses at most `ttl` after someone asks for the run,
    whatever the clock did. A live holder renews long before then (every `ttl / 3`)."""
    if expires_at is None or ttl is None or expires_at <= now + ttl:
        return expires_at
    return now + ttl


def check_after(run_id: str, after: int | None, last_seq: int) -> None:
    if after is not None and after != last_seq:
        raise JournalConflict(
            f"run {run_id!r}: the journal ends at seq {last_seq}, not at after={after}; "
            "nothing was written",
            run_id=run_id,
            last_seq=last_seq,
        )


def key_taken(existing: JournalRecord, last_seq: int) -> JournalConflict:
    return JournalConflict(
        f"run {existing.run_id!r}: a {existing.kind!r} record with key {existing.key!r} exists "
        f"(seq {existing.seq}); nothing was written",
        run_id=existing.run_id,
        last_seq=last_seq,
        record=existing,
    )


def check_limit(limit: object) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(f"limit must be a number of records >= 1 or None, got {limit!r}")
    return limit


def check_after_arg(after: object) -> int | None:
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise ConfigurationError(f"after must be a sequence number >= 0 or None, got {after!r}")
    return after


def run_info(row: Sequence[Any], at: Callable[[Any], Any]) -> RunInfo:
    """A `RunInfo` from `(run_id, kind, status, meta, created_at, updated_at, holder,
    lease_expires_at, epoch, last_seq, now)`, each time converted by `at`."""
    run_id, kind, status, meta, created, updated, holder, expires, epoch, last_seq, now = row
    expires_at = at(expires)
    return RunInfo(
        run_id=run_id,
        kind=kind,
        status=status,
        meta=decode(run_id, meta),
        created_at=at(created),
        updated_at=at(updated),
        holder=holder,
        lease_expires_at=expires_at,
        epoch=epoch,
        last_seq=last_seq,
        leased=holder is not None and expires_at is not None and expires_at > at(now),
    )


def check_schema(where: str, version: int, supported: int = SCHEMA_VERSION) -> None:
    """Refuse tables written by a newer agentloops instead of misreading them."""
    if version > supported:
        raise StoreError(
            f"{where}: run store schema version {version} is newer than this agentloops "
            f"supports ({supported}); upgrade agentloops to read it"
        )


PAGE = 500
"""How many records `iter_records` reads at a time."""


def iter_records(
    store: RunStore,
    run_id: str,
    *,
    after: int = 0,
    page: int | None = None,
    until: int | None = None,
) -> Iterator[JournalRecord]:
    """The run's records with `seq > after` (and `<= until`, when given), in order, read
    from any `RunStore` a page of `page` records at a time (default `PAGE`; through
    `read(after=, limit=)`: a keyset query on the SQL stores), so a long journal is never
    held whole. `RunNotFound` for an unknown run (when the first page is read)."""
    page = PAGE if page is None else page
    if type(page) is not int or page < 1:
        raise ValueError(f"page must be a whole number >= 1, got {page!r}")
    while until is None or after < until:
        most = page if until is None else min(page, until - after)
        records = store.read(run_id, after=after, limit=most)
        yield from records
        if len(records) < most:
            return
        after = records[-1].seq


class StoreBase:
    """The argument checks around the backends' primitives, written once: a backend
    implements `_start`, `_acquire`, `_renew`, `_update` and `_append`, the reads, and the
    sources a follower reads from (`_source`, `_asource`)."""

    def iter_records(
        self, run_id: str, *, after: int = 0, page: int | None = None, until: int | None = None
    ) -> Iterator[JournalRecord]:
        """`iter_records` over this store (the records read a page at a time)."""
        return iter_records(self, run_id, after=after, page=page, until=until)  # type: ignore[arg-type]

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
        """Create the run, held by `holder` (epoch 1); `RunExists` when the id is taken."""
        check_name("run_id", run_id)
        return self._start(
            run_id,
            kind=check_name("kind", kind),
            ttl=check_ttl(ttl),
            holder=new_holder() if holder is None else check_name("holder", holder),
            meta=encode(run_id, "meta", meta),
            status=check_name("status", status),
        )

    def acquire(self, run_id: str, *, ttl: float, holder: str | None = None) -> Lease:
        """Take the run's lease when it is free or expired; `RunLeased` otherwise."""
        check_name("run_id", run_id)
        holder = new_holder() if holder is None else check_name("holder", holder)
        return self._acquire(run_id, ttl=check_ttl(ttl), holder=holder)

    def renew(self, lease: Lease, *, ttl: float | None = None) -> Lease:
        """Extend a current lease to now + `ttl` (default `lease.ttl`), keeping its epoch."""
        return self._renew(lease, check_ttl(lease.ttl if ttl is None else ttl))

    def break_lease(self, run_id: str) -> bool:
        """Free a run now, whoever holds it, fenced like a take-over: the epoch moves on, so
        the holder's next write raises `LeaseLost`. For an operator, when a holder is gone
        (or stuck) and its lease is not to be waited out. `False` when no one held the run;
        `RunNotFound` for an unknown run."""
        return self._break(check_name("run_id", run_id))

    def update_run(
        self,
        lease: Lease,
        *,
        status: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> RunInfo:
        """Change the header's `status` and `meta` (replaced whole) under `lease`."""
        if status is not None:
            check_name("status", status)
        text = None if meta is None else encode(lease.run_id, "meta", meta)
        return self._update(lease, status, text)

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
        entry = (kind, {} if data is None else data, key)
        return self.append_many(lease, [entry], after=after, status=status)[0]

    def append_many(
        self,
        lease: Lease,
        entries: Sequence[Entry],
        *,
        after: int | None = None,
        status: str | None = None,
    ) -> list[JournalRecord]:
        """Append `(kind, data)` or `(kind, data, key)` entries in one fenced transaction;
        `after=` makes it conditional on the journal's last seq; `status=` sets the run's."""
        new = prepare(lease.run_id, entries)
        if status is not None:
            check_name("status", status)
        return self._append(lease, new, check_after_arg(after), status)

    def follow(
        self, run_id: str, *, after: int = 0, timeout: float | None = None
    ) -> Iterator[JournalRecord]:
        """The run's records after `after` as they are appended, to the end of the drive
        (see `RunStore.follow`)."""
        from agentloops.journal import follow

        check_name("run_id", run_id)
        return follow.follow(lambda: self._source(run_id), run_id, after, timeout)

    def afollow(
        self, run_id: str, *, after: int = 0, timeout: float | None = None
    ) -> AsyncIterator[JournalRecord]:
        """`follow` on the event loop."""
        from agentloops.journal import follow

        check_name("run_id", run_id)
        return follow.afollow(lambda: self._asource(run_id), run_id, after, timeout)

    def _source(self, run_id: str) -> Source:
        raise NotImplementedError

    def _asource(self, run_id: str) -> AsyncSource:
        raise NotImplementedError

    def _start(
        self, run_id: str, *, kind: str, ttl: float, holder: str, meta: str, status: str
    ) -> Lease:
        raise NotImplementedError

    def _acquire(self, run_id: str, *, ttl: float, holder: str) -> Lease:
        raise NotImplementedError

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        raise NotImplementedError

    def _break(self, run_id: str) -> bool:
        raise NotImplementedError

    def _update(self, lease: Lease, status: str | None, meta: str | None) -> RunInfo:
        raise NotImplementedError

    def _append(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[JournalRecord]:
        raise NotImplementedError

    @property
    def _renews_in_batches(self) -> bool:
        """Whether the shared lease keeper may renew through `_renew_many`: not when a
        subclass overrides `renew`, whose override is kept."""
        return type(self).renew is StoreBase.renew

    def _renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        """Renew each lease by its ttl, in one write where the backend can: each renewed
        lease, or the `LeaseLost` that says why not (the others are renewed all the same).
        A `StoreError` means none may have been."""
        out: list[Lease | LeaseLost] = []
        for lease in leases:
            try:
                out.append(self._renew(lease, lease.ttl))
            except LeaseLost as exc:
                out.append(exc)
        return out

    @property
    def _takes_records(self) -> bool:
        """Whether the engine may write through `_append_records`: not when a subclass
        overrides `append_many` (to count, fail or log writes), whose override is kept."""
        return type(self).append_many is StoreBase.append_many

    def _append_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        """`_append` of records encoded by the caller (the engine's, sealed into the run's
        chain: `engine._chain.Chain.encode`), for a caller that needs only the last seq: a
        backend overrides it to skip decoding what it just wrote."""
        return self._append(lease, new, after, status)[-1].seq

    async def _aappend_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        """`_append_records` from the event loop: by default on agentloops' own pool for
        store I/O; a backend that need not block (memory) or that batches (SQLite's group
        commit) overrides it."""
        seq: int = await _pool.call(self._append_records, lease, new, after, status, pool=_pool.own)
        return seq
