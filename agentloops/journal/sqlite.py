"""`SQLiteStore`: the run store in one SQLite file, for threads and processes on one machine.

WAL (readers never block the writer), a busy timeout, and `BEGIN IMMEDIATE` around every
fenced write: the lease check and the write happen under SQLite's one write lock, so no
other process can take the run over in between. Times are this machine's clock.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentloops.errors import RunExists, StoreError
from agentloops.journal import JournalRecord, Lease, RunInfo
from agentloops.journal._base import (
    SCHEMA_VERSION,
    NewRecord,
    StoreBase,
    check_after,
    check_after_arg,
    fence,
    key_taken,
    leased,
    not_found,
    record,
    run_info,
    utc,
)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentloops_schema ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agentloops_runs ("
    " run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, meta TEXT NOT NULL,"
    " created_at REAL NOT NULL, updated_at REAL NOT NULL,"
    " holder TEXT, lease_expires_at REAL, epoch INTEGER NOT NULL)",
    # WITHOUT ROWID: the records are clustered by (run_id, seq), so a read is one range scan.
    "CREATE TABLE IF NOT EXISTS agentloops_journal ("
    " run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, key TEXT,"
    " data TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID",
    "CREATE UNIQUE INDEX IF NOT EXISTS agentloops_journal_key"
    " ON agentloops_journal (run_id, kind, key) WHERE key IS NOT NULL",
)

# The header with the journal's last record, whose time counts as the run's last update.
_INFO = (
    "SELECT r.run_id, r.kind, r.status, r.meta, r.created_at, max(r.updated_at, coalesce(j.at, 0)),"
    " r.holder, r.lease_expires_at, r.epoch, coalesce(j.seq, 0)"
    " FROM agentloops_runs r LEFT JOIN agentloops_journal j ON j.run_id = r.run_id"
    " AND j.seq = (SELECT max(seq) FROM agentloops_journal WHERE run_id = r.run_id)"
)
_RECORD = "SELECT seq, kind, key, CAST(data AS BLOB), at FROM agentloops_journal"


class SQLiteStore(StoreBase):
    """A `RunStore` in one SQLite file, shared by threads and by processes on one machine.

    Its tables are `agentloops_runs`, `agentloops_journal` and `agentloops_schema`; an
    application may keep its own tables in the same file (open it with `connect()`).
    Do not put the file on a network filesystem: SQLite's locks are not reliable there.
    Across machines, use `PostgresStore`.

    Args:
        path: the database file, created when missing.
        timeout: seconds a call waits for another process's write lock.

    Examples:
        >>> import tempfile, pathlib
        >>> store = SQLiteStore(pathlib.Path(tempfile.mkdtemp()) / "runs.db")
        >>> lease = store.start("r1", kind="react", ttl=30)
        >>> store.append(lease, "model", {"text": "hi"}, status="finished").seq
        1
        >>> store.run_info("r1").status
        'finished'
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0):
        self._setup(Path(path), timeout)

    def _setup(self, path: Path, timeout: float) -> None:
        self.path = path
        """The database file."""
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        with self._lock:
            self._connection()

    def connect(self) -> sqlite3.Connection:
        """A new connection to the same file, set up as the store's (WAL, busy timeout),
        for an application's own tables. The caller closes it."""
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable at each commit in WAL mode
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> sqlite3.Connection:
        """This process's connection (a forked or spawned child opens its own)."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            conn = self.connect()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc
        try:
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        try:
            with _transaction(conn, "BEGIN IMMEDIATE"):
                for statement in _SCHEMA:
                    conn.execute(statement)
                row = conn.execute(
                    "SELECT version FROM agentloops_schema WHERE component = 'journal'"
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO agentloops_schema VALUES ('journal', ?)", (SCHEMA_VERSION,)
                    )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc
        if row is not None and row[0] > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: run store schema version {row[0]} is newer than this agentloops "
                f"supports ({SCHEMA_VERSION}); upgrade agentloops to read it"
            )

    @contextmanager
    def _using(
        self, run_id: str, action: str, begin: str = "BEGIN"
    ) -> Iterator[sqlite3.Connection]:
        """One transaction on this process's connection; SQLite's errors become `StoreError`."""
        with self._lock:
            conn = self._connection()
            try:
                with _transaction(conn, begin):
                    yield conn
            except sqlite3.Error as exc:  # locked past the timeout, disk full, I/O error, ...
                raise StoreError(f"{self.path}: could not {action}: {exc}", run_id=run_id) from exc

    def _fenced(self, conn: sqlite3.Connection, lease: Lease) -> float:
        """Check `lease` inside a `BEGIN IMMEDIATE` transaction; returns the time it was checked."""
        now = time.time()  # after BEGIN IMMEDIATE returned: a wait for the lock is not counted
        row = conn.execute(
            "SELECT holder, epoch, lease_expires_at FROM agentloops_runs WHERE run_id = ?",
            (lease.run_id,),
        ).fetchone()
        fence(lease, None if row is None else (row[0], row[1], _at(row[2])), utc(now))
        return now

    def _start(
        self, run_id: str, *, kind: str, ttl: float, holder: str, meta: str, status: str
    ) -> Lease:
        with self._using(run_id, f"start run {run_id!r}", "BEGIN IMMEDIATE") as conn:
            now = time.time()
            inserted = conn.execute(
                "INSERT INTO agentloops_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)"
                " ON CONFLICT DO NOTHING",
                (run_id, kind, status, meta, now, now, holder, now + ttl),
            ).rowcount
            if not inserted:
                raise RunExists(f"run {run_id!r} exists already", run_id=run_id)
        return Lease(run_id=run_id, holder=holder, epoch=1, ttl=ttl, expires_at=utc(now + ttl))

    def _acquire(self, run_id: str, *, ttl: float, holder: str) -> Lease:
        with self._using(run_id, f"acquire run {run_id!r}", "BEGIN IMMEDIATE") as conn:
            now = time.time()
            row = conn.execute(
                "SELECT holder, lease_expires_at, epoch FROM agentloops_runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise not_found(run_id)
            if row[0] is not None and row[1] is not None and row[1] > now:
                raise leased(run_id, row[0], utc(row[1]))
            conn.execute(
                "UPDATE agentloops_runs SET holder = ?, lease_expires_at = ?, epoch = ?,"
                " updated_at = ? WHERE run_id = ?",
                (holder, now + ttl, row[2] + 1, now, run_id),
            )
        return Lease(
            run_id=run_id, holder=holder, epoch=row[2] + 1, ttl=ttl, expires_at=utc(now + ttl)
        )

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        with self._using(
            lease.run_id, f"renew the lease on run {lease.run_id!r}", "BEGIN IMMEDIATE"
        ) as conn:
            now = self._fenced(conn, lease)
            conn.execute(
                "UPDATE agentloops_runs SET lease_expires_at = ? WHERE run_id = ?",
                (now + ttl, lease.run_id),
            )
        return Lease(
            run_id=lease.run_id,
            holder=lease.holder,
            epoch=lease.epoch,
            ttl=ttl,
            expires_at=utc(now + ttl),
        )

    def release(self, lease: Lease) -> bool:
        with self._using(lease.run_id, f"release run {lease.run_id!r}", "BEGIN IMMEDIATE") as conn:
            now = time.time()
            cursor = conn.execute(
                "UPDATE agentloops_runs SET holder = NULL, lease_expires_at = NULL,"
                " updated_at = ? WHERE run_id = ? AND epoch = ? AND lease_expires_at > ?",
                (now, lease.run_id, lease.epoch, now),
            )
            return cursor.rowcount > 0

    def _update(self, lease: Lease, status: str | None, meta: str | None) -> RunInfo:
        with self._using(lease.run_id, f"update run {lease.run_id!r}", "BEGIN IMMEDIATE") as conn:
            now = self._fenced(conn, lease)
            conn.execute(
                "UPDATE agentloops_runs SET status = coalesce(?, status), meta = coalesce(?, meta),"
                " updated_at = ? WHERE run_id = ?",
                (status, meta, now, lease.run_id),
            )
            return self._info(conn, lease.run_id, now)

    def _append(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[JournalRecord]:
        run_id = lease.run_id
        with self._using(run_id, f"append to run {run_id!r}", "BEGIN IMMEDIATE") as conn:
            now = self._fenced(conn, lease)
            last = conn.execute(
                "SELECT max(seq) FROM agentloops_journal WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            last = last or 0
            check_after(run_id, after, last)
            for entry in new:
                existing = (
                    None if entry.key is None else self._find(conn, run_id, entry.kind, entry.key)
                )
                if existing is not None:
                    raise key_taken(existing, last)
            conn.executemany(
                "INSERT INTO agentloops_journal VALUES (?, ?, ?, ?, ?, ?)",
                [(run_id, last + i, e.kind, e.key, e.data, now) for i, e in enumerate(new, 1)],
            )
            if status is not None:
                conn.execute(
                    "UPDATE agentloops_runs SET status = ?, updated_at = ? WHERE run_id = ?",
                    (status, now, run_id),
                )
        at = utc(now)
        return [record(run_id, last + i, e.kind, e.key, e.data, at) for i, e in enumerate(new, 1)]

    def read(self, run_id: str, *, after: int = 0) -> list[JournalRecord]:
        start = check_after_arg(after) or 0
        with self._using(run_id, f"read run {run_id!r}") as conn:
            if (
                conn.execute("SELECT 1 FROM agentloops_runs WHERE run_id = ?", (run_id,)).fetchone()
                is None
            ):
                raise not_found(run_id)
            rows = conn.execute(
                f"{_RECORD} WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, start)
            ).fetchall()
        return [record(run_id, seq, kind, key, data, utc(at)) for seq, kind, key, data, at in rows]

    def find(self, run_id: str, *, kind: str, key: str) -> JournalRecord | None:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._find(conn, run_id, kind, key)

    @staticmethod
    def _find(conn: sqlite3.Connection, run_id: str, kind: str, key: str) -> JournalRecord | None:
        row = conn.execute(
            f"{_RECORD} WHERE run_id = ? AND kind = ? AND key = ?", (run_id, kind, key)
        ).fetchone()
        return None if row is None else record(run_id, row[0], row[1], row[2], row[3], utc(row[4]))

    def run_info(self, run_id: str) -> RunInfo:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._info(conn, run_id, time.time())

    def _info(self, conn: sqlite3.Connection, run_id: str, now: float) -> RunInfo:
        row = conn.execute(f"{_INFO} WHERE r.run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise not_found(run_id)
        return _run_info(row, now)

    def list_runs(self, *, status: str | None = None, kind: str | None = None) -> list[RunInfo]:
        with self._using("", "list the runs") as conn:
            now = time.time()
            rows = conn.execute(
                f"{_INFO} WHERE coalesce(?, r.status) = r.status AND coalesce(?, r.kind) = r.kind"
                " ORDER BY r.created_at, r.run_id",
                (status, kind),
            ).fetchall()
        return [_run_info(row, now) for row in rows]

    def delete(self, run_id: str, *, force: bool = False) -> bool:
        with self._using(run_id, f"delete run {run_id!r}", "BEGIN IMMEDIATE") as conn:
            row = conn.execute(
                "SELECT holder, lease_expires_at FROM agentloops_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return False
            if not force and row[0] is not None and row[1] is not None and row[1] > time.time():
                raise leased(run_id, row[0], utc(row[1]))
            conn.execute("DELETE FROM agentloops_journal WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM agentloops_runs WHERE run_id = ?", (run_id,))
        return True

    def close(self) -> None:
        """Close this process's connection; a later call opens a new one."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Picklable (process pools, Dask): the receiver opens its own connection.
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["path"], state["timeout"])


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _at(seconds: float | None) -> Any:
    return None if seconds is None else utc(seconds)


def _run_info(row: tuple[Any, ...], now: float) -> RunInfo:
    run_id, kind, status, meta, created, updated, holder, expires, epoch, last_seq = row
    return run_info(
        run_id=run_id,
        kind=kind,
        status=status,
        meta=meta,
        created_at=utc(created),
        updated_at=utc(updated),
        holder=holder,
        lease_expires_at=_at(expires),
        epoch=epoch,
        last_seq=last_seq,
        now=utc(now),
    )
