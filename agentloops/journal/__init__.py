"""Run stores: an append-only journal per run, driven under a fenced lease.

A durable driver journals every outcome of a run (model responses, tool calls, plans,
approval decisions) as small JSON records, and replays them on resume. One holder at a
time drives a run: it holds a lease (holder id, expiry, a fencing epoch), and every
write names that lease, so a holder that lost it writes nothing. Three backends pass
one conformance suite: `MemoryStore`, `SQLiteStore` (processes on one machine) and
`PostgresStore` (machines; the `postgres` extra). See docs/durability.md.

Rule: the facade of the run stores; the backends load lazily and import `records`, never
this module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentloops.journal.records import (
    DRIVE_ENDS,
    Entry,
    JournalRecord,
    Lease,
    RunInfo,
    RunStore,
)

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.journal.keeper import LeaseKeeper
    from agentloops.journal.memory import MemoryStore
    from agentloops.journal.postgres import PostgresStore
    from agentloops.journal.sqlite import SQLiteStore

__all__ = [
    "DRIVE_ENDS",
    "Entry",
    "JournalRecord",
    "Lease",
    "LeaseKeeper",
    "MemoryStore",
    "PostgresStore",
    "RunInfo",
    "RunStore",
    "SQLiteStore",
]

_LAZY = {
    "LeaseKeeper": "agentloops.journal.keeper",
    "MemoryStore": "agentloops.journal.memory",
    "PostgresStore": "agentloops.journal.postgres",
    "SQLiteStore": "agentloops.journal.sqlite",
}


def __getattr__(name: str) -> object:
    # The backends load on first access: PostgresStore needs psycopg (an extra).
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloops.journal' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
