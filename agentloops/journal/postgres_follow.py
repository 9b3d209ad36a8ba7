"""Following a PostgreSQL run's journal: `LISTEN` on a connection of the follower's own.

Every append and deletion notifies channel `CHANNEL` with the md5 of the run id when it
commits. A follower listens before its first read, so no commit slips between a read and
the wait after it; it reads pages through the same connection. It also looks again every
`RECHECK` seconds with no notification (a writer from an older agentloops does not
notify, and a notification is dropped with a connection).

Rule: a part of `PostgresStore`; it knows the store's SQL and `follow`'s sources.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

from agentloops.errors import StoreError
from agentloops.journal.postgres import CHANNEL, PAGE_SQL, page_of
from agentloops.journal.records import JournalRecord

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.journal.postgres import PostgresStore

RECHECK = 1.0
"""Seconds a follower waits for a notification before it reads the journal anyway."""


def _payload(run_id: str) -> str:
    return hashlib.md5(run_id.encode("utf-8"), usedforsecurity=False).hexdigest()


class Follower:
    """A follower's source (`follow.Source`), blocking."""

    def __init__(self, store: PostgresStore, run_id: str):
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

    def __init__(self, store: PostgresStore, run_id: str):
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
