"""Reading and following a PostgreSQL run's journal: its pages, and `LISTEN` on a
connection of the follower's own.

Every append and deletion notifies channel `CHANNEL` with the md5 of the run id when it
commits. A follower listens before its first read, so no commit slips between a read and
the wait after it; it reads pages through the same connection. It also looks again every
`RECHECK` seconds with no notification (a writer from an older agentloops does not
notify, and a notification is dropped with a connection).

Rule: a part of `PostgresStore` (which imports it, never the reverse); it knows the
journal's tables and `follow`'s sources.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timezone
from typing import Any, Protocol

from agentloops.errors import StoreError
from agentloops.journal._base import not_found, record
from agentloops.journal.records import JournalRecord

CHANNEL = "agentloops_journal"
"""The `NOTIFY` channel of appends and deletions; the payload is the md5 of the run id (a
payload is short, a run id need not be)."""
NOTIFY = f"pg_notify('{CHANNEL}', md5(%(run_id)s))"
"""Tells the followers of run `%(run_id)s`, when the transaction commits."""

# A page of a run's records, or one row of NULLs for a run with none after `seq`, or no
# row at all for an unknown run.
PAGE_SQL = (
    "SELECT j.seq, j.kind, j.key, j.data::text, j.at FROM agentloops_runs r"
    " LEFT JOIN agentloops_journal j ON j.run_id = r.run_id AND j.seq > %s"
    " WHERE r.run_id = %s ORDER BY j.seq LIMIT %s"
)

RECHECK = 1.0
"""Seconds a follower waits for a notification before it reads the journal anyway."""


class _Store(Protocol):
    """What a follower needs of its `PostgresStore`."""

    @property
    def _psycopg(self) -> Any: ...
    @property
    def conninfo(self) -> str: ...
    @property
    def connect_timeout(self) -> float: ...
    def connect(self, **kwargs: Any) -> Any: ...


def as_utc(value: datetime | None) -> Any:
    return None if value is None else value.astimezone(timezone.utc)


def page_of(run_id: str, rows: list[tuple[Any, ...]]) -> list[JournalRecord]:
    """`PAGE_SQL`'s rows as records; `RunNotFound` when there is none (no such run)."""
    if not rows:
        raise not_found(run_id)
    return [
        record(run_id, seq, kind, key, data, as_utc(at))
        for seq, kind, key, data, at in rows
        if seq is not None  # the one row of a run with no record after `after`
    ]


def _payload(run_id: str) -> str:
    return hashlib.md5(run_id.encode("utf-8"), usedforsecurity=False).hexdigest()


class Follower:
    """A follower's source (`follow.Source`), blocking."""

    def __init__(self, store: _Store, run_id: str):
        self.store, self.run_id, self.payload = store, run_id, _payload(run_id)
        self.conn: Any = None

    def _failed(self, what: str, exc: Exception) -> StoreError:
        return StoreError(
            f"PostgreSQL: could not {what} run {self.run_id!r}: {exc}", run_id=self.run_id
        )

    def _connection(self) -> Any:
        if self.conn is None:
            try:
                conn = self.store.connect(autocommit=True)
                conn.execute(f"LISTEN {CHANNEL}")
            except self.store._psycopg.Error as exc:
                raise self._failed("follow", exc) from exc
            self.conn = conn
        return self.conn

    def page(self, after: int, limit: int) -> list[JournalRecord]:
        conn = self._connection()
        try:
            rows = conn.execute(PAGE_SQL, (after, self.run_id, limit)).fetchall()
        except self.store._psycopg.Error as exc:
            raise self._failed("read", exc) from exc
        return page_of(self.run_id, rows)

    def wait(self, timeout: float | None) -> None:
        left = RECHECK if timeout is None else min(timeout, RECHECK)
        deadline = time.monotonic() + left
        conn = self._connection()
        try:
            while (left := deadline - time.monotonic()) > 0:
                for note in conn.notifies(timeout=left, stop_after=1):
                    if note.payload == self.payload:
                        return
        except self.store._psycopg.Error as exc:
            raise self._failed("follow", exc) from exc

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class AsyncFollower:
    """`Follower` on the event loop, through psycopg's `AsyncConnection`."""

    def __init__(self, store: _Store, run_id: str):
        self.store, self.run_id, self.payload = store, run_id, _payload(run_id)
        self.conn: Any = None

    def _failed(self, what: str, exc: Exception) -> StoreError:
        return StoreError(
            f"PostgreSQL: could not {what} run {self.run_id!r}: {exc}", run_id=self.run_id
        )

    async def _connection(self) -> Any:
        if self.conn is None:
            psycopg = self.store._psycopg
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.store.conninfo,
                    autocommit=True,
                    connect_timeout=max(1, round(self.store.connect_timeout)),
                )
                await conn.execute(f"LISTEN {CHANNEL}")
            except psycopg.Error as exc:
                raise self._failed("follow", exc) from exc
            self.conn = conn
        return self.conn

    async def page(self, after: int, limit: int) -> list[JournalRecord]:
        conn = await self._connection()
        try:
            cursor = await conn.execute(PAGE_SQL, (after, self.run_id, limit))
            rows = await cursor.fetchall()
        except self.store._psycopg.Error as exc:
            raise self._failed("read", exc) from exc
        return page_of(self.run_id, rows)

    async def wait(self, timeout: float | None) -> None:
        left = RECHECK if timeout is None else min(timeout, RECHECK)
        deadline = time.monotonic() + left
        conn = await self._connection()
        try:
            while (left := deadline - time.monotonic()) > 0:
                async for note in conn.notifies(timeout=left, stop_after=1):
                    if note.payload == self.payload:
                        return
        except self.store._psycopg.Error as exc:
            raise self._failed("follow", exc) from exc

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
