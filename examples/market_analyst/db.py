"""One short SQLite transaction on the example's database file (the profile, the archive).

The runs' journals live in the same file, in the run store's tables (`SQLiteStore`); these
tables sit beside them. Each call opens and closes its connection, so threads and
processes share the file safely (SQLite's locking, a busy timeout).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def transaction(path: Path, *, write: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection inside one transaction: committed on success, rolled back on error.

    `write=True` takes the write lock at the start (BEGIN IMMEDIATE), so a
    read-then-write (an insert that must happen once) cannot interleave with another.
    """
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()
