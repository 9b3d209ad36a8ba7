"""Checkpoints: the names older code gives the run store, so it gets leases and exactly-once.

`Checkpointer` is the `RunStore` protocol, `MemoryCheckpointer` is `MemoryStore` and
`SQLiteCheckpointer(path, *, timeout=30.0)` is `SQLiteStore` (the same file, tables and
settings). `PlanAndExecute(checkpointer=...)` is `store=`. There is one way to keep a
run: its journal (docs/durability.md); docs/checkpoints.md says how older code moves.

Rule: names only; it knows the run stores and nothing of the loops.
"""

from __future__ import annotations

from agentloops.journal.memory import MemoryStore
from agentloops.journal.records import RunStore
from agentloops.journal.sqlite import SQLiteStore

__all__ = ["Checkpointer", "MemoryCheckpointer", "SQLiteCheckpointer"]

Checkpointer = RunStore
"""The run-store protocol (`RunStore`), under the name older code imports."""

MemoryCheckpointer = MemoryStore
"""`MemoryStore`: runs journaled in this process's memory."""

SQLiteCheckpointer = SQLiteStore
"""`SQLiteStore`: runs journaled in one SQLite file, for processes on one machine."""
