"""`SQLiteStore`: the run store in one SQLite file, for threads and processes on one machine.

WAL (readers never block the writer), a busy timeout, and `BEGIN IMMEDIATE` around every
fenced write: the lease check and the write happen under SQLite's one write lock, so no
other process can take the run over in between. Times are the writer's clock (this
machine's), with a bound: a lease's expiry is never believed more than its ttl ahead.

Rule: a backend knows `records`, `_base` and `_connection`, never the journal's facade, a
driver or a loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentloops._pool import Job
from agentloops.errors import (
    ConfigurationError,
    JournalConflict,
    LeaseLost,
    RunExists,
    StoreError,
)
from agentloops.journal._base import (
    NewRecord,
    bounded,
    check_after,
    check_after_arg,
    check_limit,
    check_schema,
    fence,
    key_taken,
    leased,
    not_found,
    record,
    run_info,
    utc,
    utc_or_none,
)
from agentloops.journal._connection import ConnectionPerProcess
from agentloops.journal._group import GroupCommit
from agentloops.journal.follow import backoff
from agentloops.journal.records import JournalRecord, Lease, RunInfo

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.journal.tool_results import SQLiteResults

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentloops_schema ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agentloops_runs ("
    " run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, meta TEXT NOT NULL,"
    " created_at REAL NOT NULL, updated_at REAL NOT NULL,"
    " holder TEXT, lease_expires_at REAL, epoch INTEGER NOT NULL, lease_ttl REAL)",
    # WITHOUT ROWID: the records are clustered by (run_id, seq), so a read is one range scan.
    "CREATE TABLE IF NOT EXISTS agentloops_journal ("
    " run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, key TEXT,"
    " data TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
    "CREATE UNIQUE INDEX IF NOT EXISTS agentloops_journal_key"
    " ON agentloops_journal (run_id, kind, key) WHERE key IS NOT NULL",
)
# The header and the journal's last record, whose time counts as the run's last update; the
# last column is the caller's clock. Text is read as bytes: invalid UTF-8 is "corrupted".
_INFO = (
    "SELECT r.run_id, r.kind, r.status, CAST(r.meta AS BLOB), r.created_at,"
    " max(r.updated_at, coalesce(j.at, 0)), r.holder, r.lease_expires_at, r.epoch,"
    " coalesce(j.seq, 0), ? FROM agentloops_runs r LEFT JOIN agentloops_journal j"
    " ON j.run_id = r.run_id"
    " AND j.seq = (SELECT max(seq) FROM agentloops_journal WHERE run_id = r.run_id)"
)
_RECORD = "SELECT seq, kind, key, CAST(data AS BLOB), at FROM agentloops_journal"
# What an append checks, in one statement: the run's lease, and its journal's last seq.
_FENCE_LAST = (
    "SELECT holder, epoch, lease_expires_at,"
    " (SELECT coalesce(max(seq), 0) FROM agentloops_journal WHERE run_id = ?)"
    " FROM agentloops_runs WHERE run_id = ?"
)
_VERSION = 2
"""The table layout this store writes: version 2 added `agentloops_runs.lease_ttl` (a file
of version 1 gets the column when it is first opened; its leases then have none)."""

# A page of a run's records, or one row of NULLs for a run with none after `seq`, or no
# row at all for an unknown run: one statement, so one snapshot.
_PAGE = (
    "SELECT j.seq, j.kind, j.key, CAST(j.data AS BLOB), j.at FROM agentloops_runs r"
    " LEFT JOIN agentloops_journal j ON j.run_id = r.run_id AND j.seq > ?"
    " WHERE r.run_id = ? ORDER BY j.seq LIMIT ?"
)


class SQLiteStore(ConnectionPerProcess):
    """A `RunStore` in one SQLite file, shared by threads and by processes on one machine.

    Its tables are `agentloops_runs`, `agentloops_journal` and `agentloops_schema`; an
    application may keep its own tables in the same file (open it with `connect()`).
    Do not put the file on a network filesystem: SQLite's locks are not reliable there.
    Across machines, use `PostgresStore`.

    Args:
        path: the database file, created when missing.
        timeout: seconds a call waits for another process's write lock.
        synchronous: `"FULL"` (the default) syncs the WAL at every commit, so a record
            survives a power cut; `"NORMAL"` syncs at checkpoints only: a record survives
            the process crashing, but the last ones may be lost if the machine does.
        clock: seconds since the epoch (`time.time`, the default): this writer's clock,
            which judges leases. An expiry more than its lease's ttl ahead of it (the clock
            was set back, or another writer's ran ahead) counts as ttl from when the run is
            next acquired. A test may pass its own.

    Examples:
        >>> import tempfile, pathlib
        >>> store = SQLiteStore(pathlib.Path(tempfile.mkdtemp()) / "runs.db")
        >>> lease = store.start("r1", kind="react", ttl=30)
        >>> store.append(lease, "model", {"text": "hi"}, status="finished").seq
        1
        >>> store.run_info("r1").status
        'finished'
    """

    def __init__(
        self,
        path: str | Path,
        *,
        timeout: float = 30.0,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Callable[[], float] = time.time,
        follow_poll: float = 0.05,
    ):
        if synchronous not in ("FULL", "NORMAL"):
            raise ConfigurationError(f'synchronous must be "FULL" or "NORMAL", got {synchronous!r}')
        if not isinstance(follow_poll, int | float) or not 0 < follow_poll <= 60:
            raise ConfigurationError(
                f"follow_poll must be > 0 and <= 60 seconds, got {follow_poll!r}"
            )
        self.path = Path(path)
        """The database file."""
        self.timeout = timeout
        self.synchronous = synchronous
        self._clock = clock
        self.follow_poll = float(follow_poll)
        """The longest a follower waits between two looks at the file (see `follow`)."""
        self._group = GroupCommit(self._commit, f"agentloops-sqlite {self.path.name}")
        """The asyncio driver's appends, committed in batches (`journal._group`)."""
        self._init_connection()

    def _settings(self) -> dict[str, Any]:
        settings = {
            "path": self.path,
            "timeout": self.timeout,
            "synchronous": self.synchronous,
            "follow_poll": self.follow_poll,
        }
        return settings if self._clock is time.time else {**settings, "clock": self._clock}

    def connect(self) -> sqlite3.Connection:
        """A new connection to the same file, set up as the store's (WAL, busy timeout,
        autocommit unless you `BEGIN`), for an application's own tables. Close it yourself."""
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn

    def tool_results(self) -> SQLiteResults:
        """The tool results a `ToolCache(store=...)` keeps in this file, shared by every
        process using it; its table is made on first use."""
        from agentloops.journal.tool_results import SQLiteResults

        return SQLiteResults(self)

    def _open(self) -> sqlite3.Connection:
        try:
            conn = self.connect()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc
        try:
            with _transaction(conn, "BEGIN IMMEDIATE"):
                for statement in _SCHEMA:
                    conn.execute(statement)
                version = _migrated(conn)
            check_schema(str(self.path), version, _VERSION)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _using(
        self, run_id: str, action: str, *, write: bool = False
    ) -> Iterator[sqlite3.Connection]:
        """One transaction on this process's connection (`BEGIN IMMEDIATE` to `write`, so
        the checks and the write hold the lock together); SQLite's errors become `StoreError`."""
        with self._lock:
            conn = self._connection()
            try:
                with _transaction(conn, "BEGIN IMMEDIATE" if write else "BEGIN"):
                    yield conn
            except sqlite3.Error as exc:  # locked past the timeout, disk full, I/O error, ...
                raise StoreError(f"{self.path}: could not {action}: {exc}", run_id=run_id) from exc

    def _fenced(self, conn: sqlite3.Connection, lease: Lease) -> float:
        """Check `lease` inside a write transaction; the time it was checked."""
        now = self._clock()  # after BEGIN IMMEDIATE returned: time spent waiting does not count
        query = "SELECT holder, epoch, lease_expires_at FROM agentloops_runs WHERE run_id = ?"
        row = conn.execute(query, (lease.run_id,)).fetchone()
        fence(lease, None if row is None else (row[0], row[1], utc_or_none(row[2])), utc(now))
        return now

    def _start(
        self, run_id: str, *, kind: str, ttl: float, holder: str, meta: str, status: str
    ) -> Lease:
        with self._using(run_id, f"start run {run_id!r}", write=True) as conn:
            now = self._clock()
            inserted = conn.execute(
                "INSERT INTO agentloops_runs (run_id, kind, status, meta, created_at,"
                " updated_at, holder, lease_expires_at, epoch, lease_ttl)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT DO NOTHING",
                (run_id, kind, status, meta, now, now, holder, now + ttl, ttl),
            ).rowcount
            if not inserted:
                raise RunExists(f"run {run_id!r} exists already", run_id=run_id)
        return Lease(run_id=run_id, holder=holder, epoch=1, ttl=ttl, expires_at=utc(now + ttl))

    def _acquire(self, run_id: str, *, ttl: float, holder: str) -> Lease:
        with self._using(run_id, f"acquire run {run_id!r}", write=True) as conn:
            now = self._clock()
            query = (
                "SELECT holder, lease_expires_at, epoch, lease_ttl FROM agentloops_runs"
                " WHERE run_id = ?"
            )
            row = conn.execute(query, (run_id,)).fetchone()
            if row is None:
                raise not_found(run_id)
            held, expires, epoch, held_ttl = row
            judged = bounded(expires, held_ttl, now)
            if held is not None and judged is not None and judged > now:
                if judged != expires:  # kept, committed: it counts from now, not from each ask
                    query = "UPDATE agentloops_runs SET lease_expires_at = ? WHERE run_id = ?"
                    conn.execute(query, (judged, run_id))
                refused = leased(run_id, held, utc(judged))
            else:
                refused = None
                conn.execute(
                    "UPDATE agentloops_runs SET holder = ?, lease_expires_at = ?, epoch = ?,"
                    " lease_ttl = ?, updated_at = ? WHERE run_id = ?",
                    (holder, now + ttl, epoch + 1, ttl, now, run_id),
                )
        if refused is not None:
            raise refused
        return Lease(
            run_id=run_id, holder=holder, epoch=epoch + 1, ttl=ttl, expires_at=utc(now + ttl)
        )

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        with self._using(lease.run_id, f"renew run {lease.run_id!r}", write=True) as conn:
            now = self._fenced(conn, lease)
            query = (
                "UPDATE agentloops_runs SET lease_expires_at = ?, lease_ttl = ? WHERE run_id = ?"
            )
            conn.execute(query, (now + ttl, ttl, lease.run_id))
        return replace(lease, ttl=ttl, expires_at=utc(now + ttl))

    def _renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        """Every lease renewed in one transaction; a lost one fails alone."""
        out: list[Lease | LeaseLost] = []
        with self._using("", f"renew {len(leases)} leases", write=True) as conn:
            for lease in leases:
                try:
                    now = self._fenced(conn, lease)
                except LeaseLost as exc:
                    out.append(exc)
                    continue
                query = (
                    "UPDATE agentloops_runs SET lease_expires_at = ?, lease_ttl = ?"
                    " WHERE run_id = ?"
                )
                conn.execute(query, (now + lease.ttl, lease.ttl, lease.run_id))
                out.append(replace(lease, expires_at=utc(now + lease.ttl)))
        return out

    def _break(self, run_id: str) -> bool:
        with self._using(run_id, f"break the lease of run {run_id!r}", write=True) as conn:
            query = "SELECT holder FROM agentloops_runs WHERE run_id = ?"
            row = conn.execute(query, (run_id,)).fetchone()
            if row is None:
                raise not_found(run_id)
            if row[0] is None:
                return False
            conn.execute(
                "UPDATE agentloops_runs SET holder = NULL, lease_expires_at = NULL,"
                " lease_ttl = NULL, epoch = epoch + 1, updated_at = ? WHERE run_id = ?",
                (self._clock(), run_id),
            )
            return True

    def release(self, lease: Lease) -> bool:
        with self._using(lease.run_id, f"release run {lease.run_id!r}", write=True) as conn:
            now = self._clock()
            cursor = conn.execute(
                "UPDATE agentloops_runs SET holder = NULL, lease_expires_at = NULL,"
                " updated_at = ? WHERE run_id = ? AND epoch = ? AND lease_expires_at > ?",
                (now, lease.run_id, lease.epoch, now),
            )
            return cursor.rowcount > 0

    def _update(self, lease: Lease, status: str | None, meta: str | None) -> RunInfo:
        with self._using(lease.run_id, f"update run {lease.run_id!r}", write=True) as conn:
            now = self._fenced(conn, lease)
            conn.execute(
                "UPDATE agentloops_runs SET status = coalesce(?, status),"
                " meta = coalesce(?, meta), updated_at = ? WHERE run_id = ?",
                (status, meta, now, lease.run_id),
            )
            return self._info(conn, lease.run_id, now)

    def _append(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[JournalRecord]:
        run_id = lease.run_id
        with self._using(run_id, f"append to run {run_id!r}", write=True) as conn:
            last, now = self._insert(conn, lease, new, after, status)
        at, first = utc(now), last - len(new)
        return [record(run_id, first + i, e.kind, e.key, e.data, at) for i, e in enumerate(new, 1)]

    def _append_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        run_id = lease.run_id
        with self._using(run_id, f"append to run {run_id!r}", write=True) as conn:
            return self._insert(conn, lease, new, after, status)[0]

    async def _aappend_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        seq: int = await self._group.append(lease, new, after, status)
        return seq

    def _commit(self, jobs: list[Job]) -> None:
        """A group commit's batch in one transaction: each job's append fenced on its own
        (a refused one fails alone, before it wrote anything), one commit for all."""
        with self._lock:
            try:
                conn = self._connection()
                with _transaction(conn, "BEGIN IMMEDIATE"):
                    for job in jobs:
                        try:
                            job.value = self._insert(conn, *job.args)[0]
                        except (LeaseLost, JournalConflict) as exc:
                            job.error = exc
            except sqlite3.Error as exc:  # rolled back: none of them was written
                for job in jobs:
                    if job.error is None or not isinstance(job.error, LeaseLost | JournalConflict):
                        run_id = job.args[0].run_id
                        job.value = None
                        job.error = StoreError(
                            f"{self.path}: could not append to run {run_id!r}: {exc}",
                            run_id=run_id,
                        )
                        job.error.__cause__ = exc

    def _insert(
        self,
        conn: sqlite3.Connection,
        lease: Lease,
        new: list[NewRecord],
        after: int | None,
        status: str | None,
    ) -> tuple[int, float]:
        """Append inside a write transaction, fenced: the last seq, and the records' time.
        Every refusal (`LeaseLost`, `JournalConflict`) comes before anything is written."""
        run_id = lease.run_id
        now = self._clock()  # after BEGIN IMMEDIATE returned, as `_fenced`
        row = conn.execute(_FENCE_LAST, (run_id, run_id)).fetchone()
        current = row is not None and row[1] == lease.epoch and row[0] is not None
        if not (current and row[2] is not None and row[2] > now):  # else: `fence` says why
            fence(lease, None if row is None else (row[0], row[1], utc_or_none(row[2])), utc(now))
        last = row[3]
        check_after(run_id, after, last)
        for entry in new:
            taken = entry.key and self._find(conn, run_id, entry.kind, entry.key)
            if taken:
                raise key_taken(taken, last)
        conn.executemany(
            "INSERT INTO agentloops_journal VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, last + i, e.kind, e.key, e.data, now) for i, e in enumerate(new, 1)],
        )
        if status is not None:
            query = "UPDATE agentloops_runs SET status = ?, updated_at = ? WHERE run_id = ?"
            conn.execute(query, (status, now, run_id))
        return last + len(new), now

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[JournalRecord]:
        start = check_after_arg(after) or 0
        most = check_limit(limit)
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return _page(conn, run_id, start, -1 if most is None else most)

    def _source(self, run_id: str) -> _Follower:
        return _Follower(self, run_id)

    def _asource(self, run_id: str) -> _AsyncFollower:
        return _AsyncFollower(_Follower(self, run_id))

    def find(self, run_id: str, *, kind: str, key: str) -> JournalRecord | None:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._find(conn, run_id, kind, key)

    @staticmethod
    def _find(conn: sqlite3.Connection, run_id: str, kind: str, key: str) -> JournalRecord | None:
        query = f"{_RECORD} WHERE run_id = ? AND kind = ? AND key = ?"
        row = conn.execute(query, (run_id, kind, key)).fetchone()
        return None if row is None else record(run_id, row[0], row[1], row[2], row[3], utc(row[4]))

    def run_info(self, run_id: str) -> RunInfo:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._info(conn, run_id, self._clock())

    @staticmethod
    def _info(conn: sqlite3.Connection, run_id: str, now: float) -> RunInfo:
        row = conn.execute(f"{_INFO} WHERE r.run_id = ?", (now, run_id)).fetchone()
        if row is None:
            raise not_found(run_id)
        return run_info(row, utc_or_none)

    def list_runs(self, *, status: str | None = None, kind: str | None = None) -> list[RunInfo]:
        with self._using("", "list the runs") as conn:
            rows = conn.execute(
                f"{_INFO} WHERE coalesce(?, r.status) = r.status AND coalesce(?, r.kind) = r.kind"
                " ORDER BY r.created_at, r.run_id",
                (self._clock(), status, kind),
            ).fetchall()
        return [run_info(row, utc_or_none) for row in rows]

    def delete(self, run_id: str, *, force: bool = False) -> bool:
        with self._using(run_id, f"delete run {run_id!r}", write=True) as conn:
            query = "SELECT holder, lease_expires_at FROM agentloops_runs WHERE run_id = ?"
            row = conn.execute(query, (run_id,)).fetchone()
            if row is None:
                return False
            if not force and row[0] is not None and row[1] is not None and row[1] > self._clock():
                raise leased(run_id, row[0], utc(row[1]))
            conn.execute("DELETE FROM agentloops_journal WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM agentloops_runs WHERE run_id = ?", (run_id,))
        return True


def _migrated(conn: sqlite3.Connection) -> int:
    """The file's table layout version, once brought up to this store's (in the caller's
    write transaction): version 1 lacks `lease_ttl`. A newer version is left as it is."""
    query = "SELECT version FROM agentloops_schema WHERE component = 'journal'"
    row = conn.execute(query).fetchone()
    if row is None:
        conn.execute("INSERT INTO agentloops_schema VALUES ('journal', ?)", (_VERSION,))
        return _VERSION
    if row[0] < 2:
        columns = {c[1] for c in conn.execute("PRAGMA table_info(agentloops_runs)")}
        if "lease_ttl" not in columns:
            conn.execute("ALTER TABLE agentloops_runs ADD COLUMN lease_ttl REAL")
        query = "UPDATE agentloops_schema SET version = ? WHERE component = 'journal'"
        conn.execute(query, (_VERSION,))
        return _VERSION
    return int(row[0])


def _page(conn: sqlite3.Connection, run_id: str, after: int, limit: int) -> list[JournalRecord]:
    """Up to `limit` records after `after` (-1: all of them); `RunNotFound` if no such run."""
    rows = conn.execute(_PAGE, (after, run_id, limit)).fetchall()
    if not rows:
        raise not_found(run_id)
    return [
        record(run_id, seq, kind, key, data, utc(at))
        for seq, kind, key, data, at in rows
        if seq is not None  # the one row of a run with no record after `after`
    ]


class _Follower:
    """A follower's source (`follow.Source`): a connection of its own, which sees another
    connection's commit as a new `PRAGMA data_version`, polled at intervals that start at
    2 ms after a change and double up to the store's `follow_poll` while nothing changes."""

    def __init__(self, store: SQLiteStore, run_id: str):
        self.store, self.run_id = store, run_id
        self.conn: sqlite3.Connection | None = None
        self.version = -1
        self.interval = backoff(0.002, store.follow_poll)

    def _connection(self) -> sqlite3.Connection:
        if self.conn is None:
            try:
                self.conn = sqlite3.connect(
                    self.store.path,
                    timeout=self.store.timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            except sqlite3.Error as exc:
                raise StoreError(
                    f"{self.store.path}: cannot follow run {self.run_id!r}: {exc}"
                ) from exc
        return self.conn

    def _checked(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise StoreError(
                f"{self.store.path}: could not {what} run {self.run_id!r}: {exc}",
                run_id=self.run_id,
            ) from exc

    def _version(self) -> int:
        row = self._checked("follow", self._connection().execute, "PRAGMA data_version")
        return int(row.fetchone()[0])

    def page(self, after: int, limit: int) -> list[JournalRecord]:
        self.version = self._version()  # before the read: a commit after it shows as a change
        return self._checked("read", _page, self._connection(), self.run_id, after, limit)  # type: ignore[no-any-return]

    def changed(self) -> float:
        """0 when the file changed since the last page; else how long to sleep next."""
        if self._version() != self.version:
            self.interval(True)
            return 0.0
        return self.interval(False)

    def wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (pause := self.changed()) > 0:
            if deadline is not None:
                pause = min(pause, deadline - time.monotonic())
                if pause <= 0:
                    return
            time.sleep(pause)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class _AsyncFollower:
    """`_Follower` on the event loop: the reads are short and run inline (WAL readers never
    wait for a writer), the sleeps are the loop's."""

    def __init__(self, follower: _Follower):
        self.follower = follower

    async def page(self, after: int, limit: int) -> list[JournalRecord]:
        return self.follower.page(after, limit)

    async def wait(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (pause := self.follower.changed()) > 0:
            if deadline is not None:
                pause = min(pause, deadline - time.monotonic())
                if pause <= 0:
                    return
            await asyncio.sleep(pause)

    async def close(self) -> None:
        self.follower.close()


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (disk full, ...)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
