"""`PostgresStore`: the run store in PostgreSQL (psycopg 3), for processes on many machines.

Lease times come from the database server's clock (`clock_timestamp()`), never from a
client's, and each fenced write is one statement that locks the run's row, checks the
lease and writes: a take-over (which bumps the epoch under the same row lock) either
happens before it, and the write finds its epoch gone, or after it has committed.

Rule: a backend knows `records`, `_base` and `_connection`, never the journal's facade, a
driver or a loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NoReturn

from agentloops._pool import Job
from agentloops.errors import JournalConflict, LeaseLost, RunExists, StoreError
from agentloops.journal._base import (
    SCHEMA_VERSION,
    NewRecord,
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
)
from agentloops.journal._connection import ConnectionPerProcess
from agentloops.journal._group import GroupCommit
from agentloops.journal.postgres_follow import NOTIFY as _NOTIFY
from agentloops.journal.postgres_follow import PAGE_SQL, as_utc, page_of
from agentloops.journal.records import JournalRecord, Lease, RunInfo

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

    from agentloops.journal.postgres_rate import PostgresRateWindow
    from agentloops.journal.tool_results import PostgresResults

    Conn = psycopg.Connection[tuple[Any, ...]]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS agentloops_schema ("
    " component text PRIMARY KEY, version integer NOT NULL)",
    # `json`, not `jsonb`: it keeps the text as written (key order included) and still checks it.
    "CREATE TABLE IF NOT EXISTS agentloops_runs ("
    " run_id text PRIMARY KEY, kind text NOT NULL, status text NOT NULL, meta json NOT NULL,"
    " created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,"
    " holder text, lease_expires_at timestamptz, epoch bigint NOT NULL, last_seq bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS agentloops_journal ("
    " run_id text NOT NULL, seq bigint NOT NULL, kind text NOT NULL, key text,"
    " data json NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE UNIQUE INDEX IF NOT EXISTS agentloops_journal_key"
    " ON agentloops_journal (run_id, kind, key) WHERE key IS NOT NULL",
)
_MIGRATION_LOCK = 0x6167656E746C6F6F  # "agentloo": serialises first connections' CREATEs

# A lease is current when its epoch is the run's and it has not expired by the server's clock.
_CURRENT = (
    "run_id = %(run_id)s AND epoch = %(epoch)s"
    " AND holder IS NOT NULL AND lease_expires_at > clock_timestamp()"
)
_TTL = "clock_timestamp() + %(ttl)s * interval '1 second'"
# Fence, allocate the sequence numbers, insert and tell the followers (at commit): one
# statement, one round trip.
_APPEND = (
    "WITH fenced AS (UPDATE agentloops_runs SET last_seq = last_seq + %(n)s,"
    " updated_at = clock_timestamp(), status = coalesce(%(status)s, status)"
    f" WHERE {_CURRENT} AND (%(after)s::bigint IS NULL OR last_seq = %(after)s::bigint)"
    " RETURNING last_seq - %(n)s AS base, updated_at AS at),"
    " added AS (INSERT INTO agentloops_journal (run_id, seq, kind, key, data, at)"
    " SELECT %(run_id)s, fenced.base + e.n, e.kind, e.key, e.data::json, fenced.at FROM fenced,"
    " unnest(%(kinds)s::text[], %(keys)s::text[], %(data)s::text[])"
    " WITH ORDINALITY AS e(kind, key, data, n) RETURNING seq, at)"
    f" SELECT seq, at, {_NOTIFY}::text FROM added ORDER BY seq"
)
# Every lease of a batch whose holder still holds it, extended by its ttl: one statement.
_RENEW_MANY = (
    "UPDATE agentloops_runs r SET lease_expires_at = clock_timestamp() + l.ttl * interval"
    " '1 second' FROM unnest(%(ids)s::text[], %(epochs)s::bigint[], %(ttls)s::float8[])"
    " AS l(run_id, epoch, ttl) WHERE r.run_id = l.run_id AND r.epoch = l.epoch"
    " AND r.holder IS NOT NULL AND r.lease_expires_at > clock_timestamp()"
    " RETURNING r.run_id, r.epoch, r.lease_expires_at"
)
_INFO = (
    "SELECT run_id, kind, status, meta::text, created_at, updated_at, holder, lease_expires_at,"
    " epoch, last_seq, clock_timestamp() FROM agentloops_runs"
)
_RECORD = "SELECT seq, kind, key, data::text, at FROM agentloops_journal"


class _KeyTaken(Exception):
    """A batch member's record repeats a key: the batch is written again a job at a time."""


def _params(
    lease: Lease, new: list[NewRecord], after: int | None, status: str | None
) -> dict[str, Any]:
    params = {"run_id": lease.run_id, "epoch": lease.epoch, "n": len(new)}
    params |= {"after": after, "status": status, "kinds": [e.kind for e in new]}
    params |= {"keys": [e.key for e in new], "data": [e.data for e in new]}
    return params


class PostgresStore(ConnectionPerProcess):
    """A `RunStore` in PostgreSQL, shared by processes on any number of machines.

    Its tables are `agentloops_runs`, `agentloops_journal` and `agentloops_schema`, created
    on first use in the connection's schema (put `options=-csearch_path=...` in the
    connection string for another); an application may keep its own tables in the same
    database (open a connection with `connect()`). Each process uses one connection per
    store, shared by its threads; a broken connection is replaced on the next call.

    Args:
        conninfo: a libpq connection string or URI (`"host=db dbname=agents user=..."`).
        connect_timeout: seconds to wait for the server when connecting.

    Raises:
        ImportError: psycopg is not installed (`pip install 'agentloops-kit[postgres]'`).
        StoreError: the server cannot be reached, or its tables are from a newer agentloops.
    """

    def __init__(self, conninfo: str = "", *, connect_timeout: float = 10.0):
        try:
            import psycopg
        except ImportError as exc:
            raise ImportError(
                "PostgresStore needs psycopg: pip install 'agentloops-kit[postgres]'"
            ) from exc
        self._psycopg = psycopg
        self.conninfo = conninfo
        """The connection string, for an application's own connections."""
        self.connect_timeout = connect_timeout
        self._group = GroupCommit(self._commit, "agentloops-postgres")
        """The asyncio driver's appends, committed in batches (`journal._group`)."""
        self._init_connection()

    def _settings(self) -> dict[str, Any]:
        return {"conninfo": self.conninfo, "connect_timeout": self.connect_timeout}

    def connect(self, **kwargs: Any) -> Conn:
        """A new connection to the store's database, for an application's own tables
        (psycopg's defaults; `kwargs` go to `psycopg.connect`). Close it yourself."""
        kwargs.setdefault("connect_timeout", max(1, round(self.connect_timeout)))
        conn: Conn = self._psycopg.connect(self.conninfo, **kwargs)
        return conn

    def rate_window(self, name: str) -> PostgresRateWindow:
        """The rate-limit window called `name`, shared through this database by every
        process (`RateLimiter(store=..., name=...)`); its table is made on first use."""
        from agentloops.journal.postgres_rate import PostgresRateWindow

        return PostgresRateWindow(self, name)

    def tool_results(self) -> PostgresResults:
        """The tool results a `ToolCache(store=...)` keeps in this database, shared by every
        process using it; its table is made on first use."""
        from agentloops.journal.tool_results import PostgresResults

        return PostgresResults(self)

    def _usable(self, conn: Conn) -> bool:
        return not conn.closed and not conn.broken

    def _open(self) -> Conn:
        try:
            conn = self.connect(autocommit=True)
        except self._psycopg.Error as exc:
            raise StoreError(f"PostgreSQL: cannot open the run store: {exc}") from exc
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement)
                query = "SELECT version FROM agentloops_schema WHERE component = 'journal'"
                row = conn.execute(query).fetchone()
                if row is None:
                    insert = "INSERT INTO agentloops_schema VALUES ('journal', %s)"
                    conn.execute(insert, (SCHEMA_VERSION,))
            check_schema("PostgreSQL", SCHEMA_VERSION if row is None else row[0])
        except self._psycopg.Error as exc:
            conn.close()
            raise StoreError(f"PostgreSQL: cannot open the run store: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _using(self, run_id: str, action: str, *, transaction: bool = False) -> Iterator[Conn]:
        """This process's connection, in autocommit (each fenced write is one statement) or
        in one `transaction`; psycopg's errors become `StoreError`."""
        with self._lock:
            conn = self._connection()
            try:
                if not transaction:
                    yield conn
                    return
                with conn.transaction():
                    yield conn
            except self._psycopg.Error as exc:  # server gone, connection dropped, disk full, ...
                raise StoreError(f"PostgreSQL: could not {action}: {exc}", run_id=run_id) from exc

    @staticmethod
    def _lost(conn: Conn, lease: Lease, after: int | None = None) -> NoReturn:
        """Say why a fenced statement matched no row: the lease, or `after=`."""
        row = conn.execute(
            "SELECT holder, epoch, lease_expires_at, last_seq, clock_timestamp()"
            " FROM agentloops_runs WHERE run_id = %s",
            (lease.run_id,),
        ).fetchone()
        now = datetime.now(timezone.utc) if row is None else as_utc(row[4])
        fence(lease, None if row is None else (row[0], row[1], as_utc(row[2])), now)
        assert row is not None  # fence raised for a deleted run
        check_after(lease.run_id, after, row[3])
        raise StoreError(f"run {lease.run_id!r}: the write did not apply", run_id=lease.run_id)

    def _start(
        self, run_id: str, *, kind: str, ttl: float, holder: str, meta: str, status: str
    ) -> Lease:
        with self._using(run_id, f"start run {run_id!r}") as conn:
            row = conn.execute(
                "INSERT INTO agentloops_runs VALUES (%(run_id)s, %(kind)s, %(status)s,"
                " %(meta)s::json, clock_timestamp(), clock_timestamp(), %(holder)s,"
                f" {_TTL}, 1, 0) ON CONFLICT (run_id) DO NOTHING RETURNING lease_expires_at",
                dict(run_id=run_id, kind=kind, status=status, meta=meta, holder=holder, ttl=ttl),
            ).fetchone()
            if row is None:
                raise RunExists(f"run {run_id!r} exists already", run_id=run_id)
        return Lease(run_id=run_id, holder=holder, epoch=1, ttl=ttl, expires_at=as_utc(row[0]))

    def _acquire(self, run_id: str, *, ttl: float, holder: str) -> Lease:
        params = {"run_id": run_id, "holder": holder, "ttl": ttl}
        with self._using(run_id, f"acquire run {run_id!r}") as conn:
            while True:  # again only if the lease seen as current expired in between
                row = conn.execute(
                    "UPDATE agentloops_runs SET holder = %(holder)s, epoch = epoch + 1,"
                    f" updated_at = clock_timestamp(), lease_expires_at = {_TTL}"
                    " WHERE run_id = %(run_id)s AND (holder IS NULL OR lease_expires_at IS NULL"
                    " OR lease_expires_at <= clock_timestamp()) RETURNING epoch, lease_expires_at",
                    params,
                ).fetchone()
                if row is not None:
                    return Lease(
                        run_id=run_id,
                        holder=holder,
                        epoch=row[0],
                        ttl=ttl,
                        expires_at=as_utc(row[1]),
                    )
                held = conn.execute(
                    "SELECT holder, lease_expires_at, lease_expires_at > clock_timestamp()"
                    " FROM agentloops_runs WHERE run_id = %(run_id)s",
                    params,
                ).fetchone()
                if held is None:
                    raise not_found(run_id)
                if held[2]:
                    raise leased(run_id, held[0], as_utc(held[1]))

    def _renew(self, lease: Lease, ttl: float) -> Lease:
        params = {"run_id": lease.run_id, "epoch": lease.epoch, "ttl": ttl}
        with self._using(lease.run_id, f"renew run {lease.run_id!r}") as conn:
            row = conn.execute(
                f"UPDATE agentloops_runs SET lease_expires_at = {_TTL}"
                f" WHERE {_CURRENT} RETURNING lease_expires_at",
                params,
            ).fetchone()
            if row is None:
                self._lost(conn, lease)
        return replace(lease, ttl=ttl, expires_at=as_utc(row[0]))

    def _renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        """Every lease renewed in one statement; a lost one fails alone (and is asked why)."""
        params = {
            "ids": [lease.run_id for lease in leases],
            "epochs": [lease.epoch for lease in leases],
            "ttls": [lease.ttl for lease in leases],
        }
        with self._using("", f"renew {len(leases)} leases") as conn:
            rows = conn.execute(_RENEW_MANY, params).fetchall()
            renewed = {(run_id, epoch): expires for run_id, epoch, expires in rows}
            out: list[Lease | LeaseLost] = []
            for lease in leases:
                expires = renewed.get((lease.run_id, lease.epoch))
                if expires is not None:
                    out.append(replace(lease, expires_at=as_utc(expires)))
                    continue
                try:
                    self._lost(conn, lease)
                except LeaseLost as exc:
                    out.append(exc)
        return out

    def _break(self, run_id: str) -> bool:
        with self._using(run_id, f"break the lease of run {run_id!r}") as conn:
            row = conn.execute(
                "UPDATE agentloops_runs SET holder = NULL, lease_expires_at = NULL,"
                " epoch = epoch + 1, updated_at = clock_timestamp()"
                " WHERE run_id = %s AND holder IS NOT NULL RETURNING 1",
                (run_id,),
            ).fetchone()
            if row is not None:
                return True
            query = "SELECT 1 FROM agentloops_runs WHERE run_id = %s"
            if conn.execute(query, (run_id,)).fetchone() is None:
                raise not_found(run_id)
            return False

    def release(self, lease: Lease) -> bool:
        with self._using(lease.run_id, f"release run {lease.run_id!r}") as conn:
            cursor = conn.execute(
                "UPDATE agentloops_runs SET holder = NULL, lease_expires_at = NULL,"
                f" updated_at = clock_timestamp() WHERE {_CURRENT}",
                {"run_id": lease.run_id, "epoch": lease.epoch},
            )
            return cursor.rowcount > 0

    def _update(self, lease: Lease, status: str | None, meta: str | None) -> RunInfo:
        params = {"run_id": lease.run_id, "epoch": lease.epoch, "status": status, "meta": meta}
        with self._using(lease.run_id, f"update run {lease.run_id!r}") as conn:
            row = conn.execute(
                "UPDATE agentloops_runs SET status = coalesce(%(status)s, status),"
                " meta = coalesce(%(meta)s::json, meta), updated_at = clock_timestamp()"
                f" WHERE {_CURRENT} RETURNING 1",
                params,
            ).fetchone()
            if row is None:
                self._lost(conn, lease)
            return self._info(conn, lease.run_id)

    def _append(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[JournalRecord]:
        rows = self._insert(lease, new, after, status)
        at = as_utc(rows[0][1])
        return [
            record(lease.run_id, seq, e.kind, e.key, e.data, at)
            for e, (seq, _, _) in zip(new, rows, strict=True)
        ]

    def _append_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        seq: int = self._insert(lease, new, after, status)[-1][0]
        return seq

    def _insert(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> list[Any]:
        """The fenced append, one statement: a row `(seq, at, _)` per record."""
        run_id = lease.run_id
        with self._using(run_id, f"append to run {run_id!r}") as conn:
            try:
                rows = conn.execute(_APPEND, _params(lease, new, after, status)).fetchall()
            except self._psycopg.errors.UniqueViolation:
                self._key_taken(conn, run_id, new)
                raise
            if not rows:
                self._lost(conn, lease, after)
        return rows

    async def _aappend_records(
        self, lease: Lease, new: list[NewRecord], after: int | None, status: str | None
    ) -> int:
        seq: int = await self._group.append(lease, new, after, status)
        return seq

    def _commit(self, jobs: list[Job]) -> None:
        """A group commit's batch (`journal._group`) in one transaction, one commit for all:
        each job's append fenced on its own (a refused one fails alone: its statement
        matched no row). A key taken makes PostgreSQL abort the transaction before its
        commit: nothing was written, and each job is then written on its own."""
        if len(jobs) > 1:
            try:
                with self._using("", f"append to {len(jobs)} runs", transaction=True) as conn:
                    for job in jobs:
                        self._member(conn, job)
                return
            except _KeyTaken:
                pass
            except StoreError as exc:  # the connection: each may or may not have committed
                for job in jobs:
                    if not isinstance(job.error, LeaseLost | JournalConflict):
                        job.value, job.error = None, exc
                return
        for job in jobs:
            job.value = job.error = None
            try:
                job.value = self._append_records(*job.args)
            except (LeaseLost, JournalConflict, StoreError) as exc:
                job.error = exc

    def _member(self, conn: Conn, job: Job) -> None:
        lease, new, after, status = job.args
        try:
            rows = conn.execute(_APPEND, _params(lease, new, after, status)).fetchall()
        except self._psycopg.errors.UniqueViolation as exc:
            raise _KeyTaken from exc
        if rows:
            job.value = rows[-1][0]
            return
        try:
            self._lost(conn, lease, after)
        except (LeaseLost, JournalConflict, StoreError) as exc:
            job.error = exc

    def _key_taken(self, conn: Conn, run_id: str, new: list[NewRecord]) -> None:
        """Raise `JournalConflict` naming the stored record whose key an entry repeats."""
        for entry in new:
            taken = entry.key and self._find(conn, run_id, entry.kind, entry.key)
            if taken:
                query = "SELECT last_seq FROM agentloops_runs WHERE run_id = %s"
                last = conn.execute(query, (run_id,)).fetchone()
                raise key_taken(taken, 0 if last is None else last[0])

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[JournalRecord]:
        start = check_after_arg(after) or 0
        most = check_limit(limit)
        with self._using(run_id, f"read run {run_id!r}") as conn:
            rows = conn.execute(PAGE_SQL, (start, run_id, most)).fetchall()
        return page_of(run_id, rows)

    def _source(self, run_id: str) -> Any:
        from agentloops.journal.postgres_follow import Follower

        return Follower(self, run_id)

    def _asource(self, run_id: str) -> Any:
        from agentloops.journal.postgres_follow import AsyncFollower

        return AsyncFollower(self, run_id)

    def find(self, run_id: str, *, kind: str, key: str) -> JournalRecord | None:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._find(conn, run_id, kind, key)

    @staticmethod
    def _find(conn: Conn, run_id: str, kind: str, key: str) -> JournalRecord | None:
        query = f"{_RECORD} WHERE run_id = %s AND kind = %s AND key = %s"
        row = conn.execute(query, (run_id, kind, key)).fetchone()
        return (
            None if row is None else record(run_id, row[0], row[1], row[2], row[3], as_utc(row[4]))
        )

    def run_info(self, run_id: str) -> RunInfo:
        with self._using(run_id, f"read run {run_id!r}") as conn:
            return self._info(conn, run_id)

    @staticmethod
    def _info(conn: Conn, run_id: str) -> RunInfo:
        row = conn.execute(f"{_INFO} WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise not_found(run_id)
        return run_info(row, as_utc)

    def list_runs(self, *, status: str | None = None, kind: str | None = None) -> list[RunInfo]:
        with self._using("", "list the runs") as conn:
            rows = conn.execute(
                f"{_INFO} WHERE (%(status)s::text IS NULL OR status = %(status)s)"
                " AND (%(kind)s::text IS NULL OR kind = %(kind)s) ORDER BY created_at, run_id",
                {"status": status, "kind": kind},
            ).fetchall()
        return [run_info(row, as_utc) for row in rows]

    def delete(self, run_id: str, *, force: bool = False) -> bool:
        with self._using(run_id, f"delete run {run_id!r}", transaction=True) as conn:
            row = conn.execute(
                "SELECT holder, lease_expires_at, lease_expires_at > clock_timestamp()"
                " FROM agentloops_runs WHERE run_id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            if row is None:
                return False
            if not force and row[0] is not None and row[2]:
                raise leased(run_id, row[0], as_utc(row[1]))
            conn.execute("DELETE FROM agentloops_journal WHERE run_id = %s", (run_id,))
            conn.execute("DELETE FROM agentloops_runs WHERE run_id = %s", (run_id,))
            conn.execute(f"SELECT {_NOTIFY}", {"run_id": run_id})  # its followers end
        return True
