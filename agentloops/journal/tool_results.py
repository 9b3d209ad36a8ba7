"""Tool results kept on a run store, for `ToolCache(store=...)`: one small table of
`key -> (content, seconds, expires)` per backend, so processes sharing a store share the
cache. Times are the callers' wall clock (`time.time`): a result expires for everyone at
the same moment.

Rule: it knows the stores' connections and one table; no tool, no loop.
"""

from __future__ import annotations

import threading
from typing import Any

Kept = tuple[str, float]
"""A kept result: its text and the seconds the call took."""

_SQLITE = (
    "CREATE TABLE IF NOT EXISTS agentloops_tool_results ("
    " key TEXT PRIMARY KEY, content TEXT NOT NULL, seconds REAL NOT NULL, expires REAL)"
)
_POSTGRES = (
    "CREATE TABLE IF NOT EXISTS agentloops_tool_results ("
    " key text PRIMARY KEY, content text NOT NULL, seconds double precision NOT NULL,"
    " expires double precision)"
)


class MemoryResults:
    """A `MemoryStore`'s kept results (this process's memory)."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, float, float | None]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, now: float) -> Kept | None:
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                return None
            if row[2] is not None and now >= row[2]:
                del self._rows[key]
                return None
            return row[0], row[1]

    def put(self, key: str, kept: Kept, expires: float | None) -> None:
        with self._lock:
            self._rows[key] = (*kept, expires)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


class SQLiteResults:
    """A `SQLiteStore`'s kept results, in its file (the table is made on first use)."""

    def __init__(self, store: Any):
        self.store = store  # the SQLiteStore that made it (not imported: no circle)
        with store._using("", "create the tool results table", write=True) as conn:
            conn.execute(_SQLITE)

    def get(self, key: str, now: float) -> Kept | None:
        with self.store._using("", "read a kept tool result") as conn:
            row = conn.execute(
                "SELECT content, seconds FROM agentloops_tool_results"
                " WHERE key = ? AND (expires IS NULL OR expires > ?)",
                (key, now),
            ).fetchone()
        return None if row is None else (row[0], float(row[1]))

    def put(self, key: str, kept: Kept, expires: float | None) -> None:
        with self.store._using("", "keep a tool result", write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO agentloops_tool_results VALUES (?, ?, ?, ?)",
                (key, kept[0], kept[1], expires),
            )

    def clear(self) -> None:
        with self.store._using("", "clear the kept tool results", write=True) as conn:
            conn.execute("DELETE FROM agentloops_tool_results")


class PostgresResults:
    """A `PostgresStore`'s kept results, in its database (the table is made on first use)."""

    def __init__(self, store: Any):
        self.store = store  # the PostgresStore that made it (not imported: no circle)
        with store._using("", "create the tool results table", transaction=True) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentloops_tool_results'))")
            conn.execute(_POSTGRES)

    def get(self, key: str, now: float) -> Kept | None:
        with self.store._using("", "read a kept tool result") as conn:
            row = conn.execute(
                "SELECT content, seconds FROM agentloops_tool_results"
                " WHERE key = %s AND (expires IS NULL OR expires > %s)",
                (key, now),
            ).fetchone()
        return None if row is None else (row[0], float(row[1]))

    def put(self, key: str, kept: Kept, expires: float | None) -> None:
        with self.store._using("", "keep a tool result") as conn:
            conn.execute(
                "INSERT INTO agentloops_tool_results VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET content = EXCLUDED.content,"
                " seconds = EXCLUDED.seconds, expires = EXCLUDED.expires",
                (key, kept[0], kept[1], expires),
            )

    def clear(self) -> None:
        with self.store._using("", "clear the kept tool results") as conn:
            conn.execute("DELETE FROM agentloops_tool_results")
