"""One database connection per process, shared by its threads: what the SQL stores share.

A forked or spawned child must not use its parent's connection, so the connection is
opened again whenever the process id changed (or the connection broke); pickling a store
sends only its settings, and the receiver opens its own.

Rule: connections only; it knows no record, lease rule or driver.
"""

from __future__ import annotations

import os
import threading
from typing import Any, TypeVar

from agentloops.journal._base import StoreBase

_Store = TypeVar("_Store", bound="ConnectionPerProcess")


class ConnectionPerProcess(StoreBase):
    """A `StoreBase` holding one connection per process; subclasses open it (`_open`), say
    when it is still usable (`_usable`), and name their settings (`_settings`)."""

    _conn: Any = None

    def _init_connection(self) -> None:
        self._lock = threading.Lock()
        self._conn = None
        self._pid = 0
        with self._lock:
            self._connection()

    def _connection(self) -> Any:
        """This process's connection: call it holding `self._lock`."""
        if self._conn is None or self._pid != os.getpid() or not self._usable(self._conn):
            self._conn, self._pid = self._open(), os.getpid()
        return self._conn

    def _open(self) -> Any:
        """A new connection, its tables created and their version checked."""
        raise NotImplementedError

    def _usable(self, conn: Any) -> bool:
        return True

    def _settings(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        """Close this process's connection; a later call opens a new one."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return self._settings()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]
