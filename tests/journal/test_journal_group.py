"""Durable runs at scale (issue 26): SQLite's group commit answers each waiter with its own
outcome, and one lease keeper thread per store renews every lease in batched writes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    JournalConflict,
    LeaseLost,
    MemoryStore,
    ReActLoop,
    SQLiteStore,
    StoreError,
    tool,
)
from agentloops.journal import Lease, PostgresStore
from agentloops.journal._base import NewRecord
from agentloops.testing import ScriptedModel, use_tools


class Batches(SQLiteStore):
    """Records the size of every group commit's batch."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.batches: list[int] = []

    def _commit(self, jobs: list[Any]) -> None:
        self.batches.append(len(jobs))
        super()._commit(jobs)


class PostgresBatches(PostgresStore):
    def __init__(self, conninfo: str):
        super().__init__(conninfo)
        self.batches: list[int] = []

    def _commit(self, jobs: list[Any]) -> None:
        self.batches.append(len(jobs))
        super()._commit(jobs)


@pytest.fixture(params=["sqlite", "postgres"])
def batching(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store with a group commit, its batches recorded (PostgreSQL when a server is named)."""
    if request.param == "sqlite":
        with Batches(tmp_path / "runs.db") as store:
            yield store
        return
    with PostgresBatches(request.getfixturevalue("postgres_conninfo")) as pg:
        with pg.connect(autocommit=True) as conn:
            conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
        yield pg


def new(kind: str = "model") -> list[NewRecord]:
    return [NewRecord(kind, '{"n":1}', None)]


async def appended_together(
    store: Any, leases: list[Lease], records: list[NewRecord] | None = None
) -> list[Any]:
    """The appends of `leases`, queued while the writer is held: one batch."""
    blocker = store.start(f"blocker{len(store.batches)}", kind="react", ttl=30)
    with store._lock:  # the writer takes the blocker's append and waits here
        first = asyncio.ensure_future(store._aappend_records(blocker, new(), None, None))
        await asyncio.sleep(0.05)
        tasks = [
            asyncio.ensure_future(store._aappend_records(lease, records or new(), None, None))
            for lease in leases
        ]
        await asyncio.sleep(0.05)
    assert await first == 1
    return await asyncio.gather(*tasks, return_exceptions=True)


def test_the_appends_waiting_together_commit_together(batching: Any) -> None:
    store = batching
    leases = [store.start(f"r{i}", kind="react", ttl=30) for i in range(20)]
    seqs = asyncio.run(appended_together(store, leases))
    assert seqs == [1] * 20
    assert store.batches == [1, 20]
    seqs = asyncio.run(appended_together(store, leases))
    assert seqs == [2] * 20
    assert all(len(store.read(f"r{i}")) == 2 for i in range(20))


def test_a_fenced_out_member_fails_alone(batching: Any) -> None:
    store = batching
    leases = [store.start(f"r{i}", kind="react", ttl=30) for i in range(3)]
    store.break_lease("r1")  # r1's holder lost its lease: its append is refused
    outcomes = asyncio.run(appended_together(store, leases))
    assert outcomes[0] == 1 and outcomes[2] == 1
    assert isinstance(outcomes[1], LeaseLost)
    assert [len(store.read(f"r{i}")) for i in range(3)] == [1, 0, 1]


def test_a_member_whose_key_is_taken_fails_alone(batching: Any) -> None:
    store = batching
    leases = [store.start(f"r{i}", kind="react", ttl=30) for i in range(3)]
    keyed = [NewRecord("tool_started", '{"n":1}', "c1")]
    store.append(leases[1], "tool_started", {"n": 0}, key="c1")  # r1 has this key already
    outcomes = asyncio.run(appended_together(store, leases, keyed))
    assert outcomes[0] == 1 and outcomes[2] == 1
    assert isinstance(outcomes[1], JournalConflict) and outcomes[1].record.data == {"n": 0}
    assert [len(store.read(f"r{i}")) for i in range(3)] == [1, 1, 1]


def test_a_failed_transaction_fails_every_member_and_writes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Batches(tmp_path / "runs.db")
    leases = [store.start(f"r{i}", kind="react", ttl=30) for i in range(3)]
    insert = store._insert

    def failing(conn: Any, lease: Lease, *rest: Any) -> Any:
        if lease.run_id == "r2":
            raise sqlite3.OperationalError("disk I/O error")
        return insert(conn, lease, *rest)

    monkeypatch.setattr(store, "_insert", failing)
    outcomes = asyncio.run(appended_together(store, leases))
    assert all(isinstance(o, StoreError) and "disk I/O error" in str(o) for o in outcomes)
    assert [len(store.read(f"r{i}")) for i in range(3)] == [0, 0, 0]  # rolled back, all


def test_a_cancelled_waiter_not_yet_taken_is_dropped(batching: Any) -> None:
    store = batching
    first, second = (store.start(f"r{i}", kind="react", ttl=30) for i in range(2))

    async def main() -> None:
        with store._lock:
            one = asyncio.ensure_future(store._aappend_records(first, new(), None, None))
            await asyncio.sleep(0.05)  # taken by the writer, which waits for the lock
            two = asyncio.ensure_future(store._aappend_records(second, new(), None, None))
            await asyncio.sleep(0)
            two.cancel()
        assert await one == 1
        with pytest.raises(asyncio.CancelledError):
            await two

    asyncio.run(main())
    assert len(store.read("r1")) == 0


# -- one lease keeper per store and process ---------------------------------------------


class CountingRenewals(MemoryStore):
    """Records every batched renewal's size."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals: list[int] = []

    def _renew_many(self, leases: Sequence[Lease]) -> list[Lease | LeaseLost]:
        self.renewals.append(len(leases))
        return super()._renew_many(leases)


def keeper_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("lease-keeper"))


def test_one_keeper_thread_renews_every_run_in_batches() -> None:
    store = CountingRenewals()
    seen: list[int] = []

    @tool
    async def wait() -> str:
        """Wait past the lease's ttl."""
        await asyncio.sleep(1.5)
        seen.append(keeper_threads())
        return "ok"

    async def main() -> list[Any]:
        loops = [
            ReActLoop(
                ScriptedModel([use_tools(("wait", {})), "done"]), [wait], store=store, lease_ttl=1.0
            )
            for _ in range(10)
        ]
        return await asyncio.gather(
            *(loop.arun("go", run_id=f"r{i}") for i, loop in enumerate(loops))
        )

    results = asyncio.run(main())
    assert [r.answer for r in results] == ["done"] * 10  # each kept its lease past its ttl
    assert seen == [1] * 10  # one thread for all ten
    assert max(store.renewals) > 1  # renewed together


def test_a_lost_lease_reaches_its_run_alone() -> None:
    store = CountingRenewals()

    @tool
    async def wait() -> str:
        """Wait past the lease's ttl."""
        await asyncio.sleep(1.5)
        return "ok"

    async def main() -> list[Any]:
        loops = [
            ReActLoop(
                ScriptedModel([use_tools(("wait", {})), "done"]), [wait], store=store, lease_ttl=1.0
            )
            for _ in range(3)
        ]
        runs = [
            asyncio.ensure_future(loop.arun("go", run_id=f"r{i}")) for i, loop in enumerate(loops)
        ]
        await asyncio.sleep(0.3)
        store.break_lease("r1")  # an operator frees r1: its holder must stop
        return await asyncio.gather(*runs, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[1], LeaseLost)
    assert outcomes[0].answer == outcomes[2].answer == "done"


def test_the_keeper_thread_ends_with_the_last_run() -> None:
    store = MemoryStore()
    ReActLoop(ScriptedModel(["hi"]), [], store=store).run("go", run_id="r1")
    deadline = time.monotonic() + 5
    while keeper_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert keeper_threads() == 0
