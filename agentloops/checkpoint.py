"""Checkpoints: where a run's JSON state lives between steps, so a crash or a pause loses nothing.

A checkpointer stores one JSON object per run id. `MemoryCheckpointer` keeps it in
this process; `SQLiteCheckpointer` keeps it in a file that threads and processes on
one machine can share (WAL, one transaction per save, a busy timeout).

Rule: a store; it knows errors and nothing of the loops whose state it keeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentloops.errors import CheckpointError

SCHEMA_VERSION = 1
"""The SQLite file layout this version writes (`PRAGMA user_version`)."""


@runtime_checkable
class Checkpointer(Protocol):
    """Stores the JSON state of runs by id. Implementations must be thread-safe."""

    def save(self, run_id: str, state: dict[str, Any]) -> None:
        """Store `state` (a JSON-ready dict) for `run_id`, replacing any earlier one."""
        ...

    def load(self, run_id: str) -> dict[str, Any] | None:
        """The last state saved for `run_id`, or `None` for an unknown run.

        Raises `CheckpointError` (naming the run) for a state that cannot be read.
        """
        ...

    def delete(self, run_id: str) -> None:
        """Forget `run_id`; unknown ids are ignored."""
        ...

    def list_runs(self) -> list[str]:
        """Every stored run id, oldest save first."""
        ...


def _encode(run_id: str, state: dict[str, Any]) -> str:
    if not isinstance(state, dict):
        raise CheckpointError(f"run {run_id!r}: state must be a dict", run_id=run_id)
    try:
        return json.dumps(state, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"run {run_id!r}: state is not JSON: {exc}", run_id=run_id) from exc


def _decode(run_id: str, text: object) -> dict[str, Any]:
    try:
        state = json.loads(text)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"run {run_id!r}: the saved state is corrupted ({exc})", run_id=run_id
        ) from exc
    if not isinstance(state, dict):
        raise CheckpointError(
            f"run {run_id!r}: the saved state is corrupted (not a JSON object)", run_id=run_id
        )
    return state


class MemoryCheckpointer:
    """Keeps states in a dict, as JSON text, so a load never aliases what was saved."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, run_id: str, state: dict[str, Any]) -> None:
        text = _encode(run_id, state)
        with self._lock:
            self._states.pop(run_id, None)  # re-insert: keeps "oldest save first" order
            self._states[run_id] = text

    def load(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            text = self._states.get(run_id)
        return None if text is None else _decode(run_id, text)

    def delete(self, run_id: str) -> None:
        with self._lock:
            self._states.pop(run_id, None)

    def list_runs(self) -> list[str]:
        with self._lock:
            return list(self._states)


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already (it does on a full disk):
    the error that got us here is the one to report, never a failed rollback."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class SQLiteCheckpointer:
    """States in one SQLite file, shared by threads and by processes on one machine.

    The file uses WAL (readers never block the writer), each save is one
    `BEGIN IMMEDIATE` transaction, and a writer that finds the file locked waits up to
    `timeout` seconds. The layout is versioned with `PRAGMA user_version`; a file
    written by a newer agentloops raises `CheckpointError` instead of being misread.

    Do not put the file on a network filesystem (NFS, SMB): SQLite's locks are not
    reliable there and WAL needs shared memory. Across machines, give each run
    directory its own file on shared storage, or supply your own `Checkpointer`.

    Args:
        path: the database file (created with its directory's permissions).
        timeout: seconds a save or load waits for another writer's lock.

    Examples:
        >>> import tempfile, pathlib
        >>> store = SQLiteCheckpointer(pathlib.Path(tempfile.mkdtemp()) / "runs.db")
        >>> store.save("r1", {"step": 2})
        >>> store.load("r1")
        {'step': 2}
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0):
        self._setup(Path(path), timeout)

    def _setup(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        with self._lock:
            self._connect()

    def _connect(self) -> sqlite3.Connection:
        """The connection for this process (a forked child opens its own)."""
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per call.
        conn = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit survives a crash of the process, but the last
            # commits may be lost if the machine loses power (the WAL is synced only at
            # checkpoints; agentloops.journal.sqlite says so, and defaults to FULL).
            conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise CheckpointError(
                f"{self.path}: cannot open checkpoints: {exc}", run_id=""
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise CheckpointError(
                    f"{self.path}: checkpoint schema version {version} is newer than this "
                    f"agentloops supports ({SCHEMA_VERSION}); upgrade agentloops to read it",
                    run_id="",
                )
            if version == 0:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS runs ("
                    " run_id TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at REAL NOT NULL)"
                )
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    @contextmanager
    def _storing(self, run_id: str, action: str) -> Iterator[sqlite3.Connection]:
        """This process's connection, under the lock; SQLite's errors become `CheckpointError`."""
        with self._lock:
            conn = self._connect()
            try:
                yield conn
            except sqlite3.Error as exc:  # locked past the timeout, disk full, I/O error, ...
                code = getattr(exc, "sqlite_errorname", None)  # Python 3.11+
                why = f"{exc} ({code})" if code else str(exc)
                raise CheckpointError(
                    f"{self.path}: could not {action}: {why}", run_id=run_id
                ) from exc

    def save(self, run_id: str, state: dict[str, Any]) -> None:
        text = _encode(run_id, state)
        with self._storing(run_id, f"save run {run_id!r}") as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO runs (run_id, state, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(run_id) DO UPDATE SET "
                    "state = excluded.state, updated_at = excluded.updated_at",
                    (run_id, text, time.time()),
                )
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def load(self, run_id: str) -> dict[str, Any] | None:
        with self._storing(run_id, f"load run {run_id!r}") as conn:
            # As bytes: a row holding invalid UTF-8 is reported as corrupted, not raised raw.
            query = "SELECT CAST(state AS BLOB) FROM runs WHERE run_id = ?"
            row = conn.execute(query, (run_id,)).fetchone()
        return None if row is None else _decode(run_id, row[0])

    def delete(self, run_id: str) -> None:
        with self._storing(run_id, f"delete run {run_id!r}") as conn:
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def list_runs(self) -> list[str]:
        with self._storing("", "list the runs") as conn:
            rows = conn.execute("SELECT run_id FROM runs ORDER BY updated_at, run_id")
            return [r[0] for r in rows.fetchall()]

    def close(self) -> None:
        """Close this process's connection; a later call opens a new one."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Picklable (for process pools and Dask): the receiver opens its own connection.
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["path"], state["timeout"])
