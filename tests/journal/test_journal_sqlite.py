"""SQLiteStore beyond the shared contract: its file, its locks, a newer schema, bad data,
and an application's own tables (full-text search) in the same file."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentloops import ConfigurationError, RunNotFound, SQLiteStore, StoreError


@pytest.fixture
def opened() -> Iterator[Callable[..., SQLiteStore]]:
    """`SQLiteStore(...)`, closed after the test (an unclosed connection warns on 3.13)."""
    stores: list[Any] = []

    def open_store(*args: Any, **kwargs: Any) -> SQLiteStore:
        stores.append(SQLiteStore(*args, **kwargs))
        return stores[-1]

    yield open_store
    for store in stores:
        store.close()


def test_schema_from_a_newer_agentloops_is_refused_with_its_version(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteStore(path).close()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE agentloops_schema SET version = 99 WHERE component = 'journal'")
    with pytest.raises(
        StoreError, match=r"schema version 99 is newer than this agentloops supports \(2\)"
    ):
        SQLiteStore(path)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StoreError, match="cannot open the run store"):
        SQLiteStore(path)


@pytest.mark.parametrize("data", [b"{not json", b"[1, 2]", b"\xff\xfe{}"])
def test_a_corrupted_record_is_a_store_error_naming_the_run(
    tmp_path: Path, data: bytes, opened: Callable[..., SQLiteStore]
) -> None:
    store = opened(tmp_path / "runs.db")
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model", {"ok": 1})
    with closing(store.connect()) as conn:
        conn.execute("UPDATE agentloops_journal SET data = ?", (data,))
    with pytest.raises(StoreError, match="run 'r1'") as caught:
        store.read("r1")
    assert caught.value.run_id == "r1"


def test_a_write_lock_held_past_the_timeout_is_a_store_error_and_writes_nothing(
    tmp_path: Path, opened: Callable[..., SQLiteStore]
) -> None:
    store = opened(tmp_path / "runs.db", timeout=0.1)
    lease = store.start("r1", kind="react", ttl=30)
    with closing(store.connect()) as other:
        other.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        try:
            with pytest.raises(StoreError, match=r"could not append to run 'r1'.*locked"):
                store.append(lease, "model")
            assert store.read("r1") == []  # readers are not blocked (WAL)
        finally:
            other.execute("ROLLBACK")
    assert store.append(lease, "model").seq == 1


def test_an_application_keeps_its_own_tables_in_the_same_file(
    tmp_path: Path, opened: Callable[..., SQLiteStore]
) -> None:
    store = opened(tmp_path / "analyst.db")
    lease = store.start("r1", kind="react", ttl=30)
    with closing(store.connect()) as conn:
        conn.execute("CREATE TABLE profile (user TEXT PRIMARY KEY, risk TEXT)")
        conn.execute("CREATE VIRTUAL TABLE reports USING fts5(run_id, body)")
        conn.execute("INSERT INTO profile VALUES ('ana', 'low')")
        conn.execute(
            "INSERT INTO reports VALUES ('r1', 'NVDA margins widened; data centre demand')"
        )
        hits = conn.execute("SELECT run_id FROM reports WHERE reports MATCH 'margins'").fetchall()
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert hits == [("r1",)]
    store.append(lease, "finished", {"report": "r1"}, status="finished")
    assert store.run_info("r1").status == "finished"


def test_opens_a_file_an_old_checkpointer_wrote_and_leaves_its_table_alone(
    tmp_path: Path, opened: Callable[..., SQLiteStore]
) -> None:
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as old:  # what SQLiteCheckpointer wrote before it was a store
        old.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, state TEXT, updated_at REAL)")
        old.execute("INSERT INTO runs VALUES ('c1', '{\"step\": 1}', 0)")
        old.execute("PRAGMA user_version = 1")
    old.close()
    store = opened(path)
    with pytest.raises(RunNotFound):  # an old whole-state run is not a journal: not read
        store.run_info("c1")
    store.append(store.start("r1", kind="react", ttl=30), "model")
    assert [r.kind for r in opened(path).read("r1")] == ["model"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT run_id, state FROM runs").fetchall() == [("c1", '{"step": 1}')]
    conn.close()


def test_pickles_as_its_settings_and_reopens(
    tmp_path: Path, opened: Callable[..., SQLiteStore]
) -> None:
    store = opened(tmp_path / "runs.db", timeout=3, synchronous="NORMAL")
    lease = store.start("r1", kind="react", ttl=30)
    with pickle.loads(pickle.dumps(store)) as copy:
        assert (copy.path, copy.timeout, copy.synchronous) == (store.path, 3, "NORMAL")
        copy.append(lease, "model")
    assert [r.kind for r in store.read("r1")] == ["model"]


def test_close_then_use_again_reopens(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model")
    assert store.run_info("r1").last_seq == 1
    store.close()


@pytest.mark.parametrize(("synchronous", "level"), [("FULL", 2), ("NORMAL", 1)])
def test_synchronous_setting(
    tmp_path: Path, synchronous: str, level: int, opened: Callable[..., SQLiteStore]
) -> None:
    store = opened(tmp_path / "runs.db", synchronous=synchronous)
    with closing(store.connect()) as conn:
        assert conn.execute("PRAGMA synchronous").fetchone() == (level,)
    with pytest.raises(ConfigurationError, match="synchronous"):
        SQLiteStore(tmp_path / "runs.db", synchronous="OFF")  # type: ignore[arg-type]


def test_a_writer_whose_clock_ran_ahead_locks_a_run_for_a_ttl_not_an_hour(
    tmp_path: Path, opened: Callable[..., SQLiteStore]
) -> None:
    """Leases are the writers' clock, with a bound: a process that took a lease with its
    clock an hour ahead, and died, holds the run for at most a ttl after another asks."""
    import time
    from datetime import datetime, timezone

    from agentloops import RunLeased

    now = [time.time()]
    ahead = opened(tmp_path / "runs.db", clock=lambda: now[0] + 3600)
    here = opened(tmp_path / "runs.db", clock=lambda: now[0])
    ahead.start("r1", kind="react", ttl=30, holder="ahead")
    with pytest.raises(RunLeased) as caught:
        here.acquire("r1", ttl=30)
    assert caught.value.until == datetime.fromtimestamp(now[0] + 30, timezone.utc)
    now[0] += 31
    assert here.acquire("r1", ttl=30).epoch == 2


def test_a_file_of_the_first_layout_gets_the_lease_ttl_column(tmp_path: Path) -> None:
    """A version 1 file (no `lease_ttl`) is brought up to version 2 when first opened; its
    runs keep their leases, judged without a bound until they are next taken."""
    from agentloops import RunLeased

    path = tmp_path / "runs.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "CREATE TABLE agentloops_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO agentloops_schema VALUES ('journal', 1)")
        conn.execute(
            "CREATE TABLE agentloops_runs (run_id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
            " status TEXT NOT NULL, meta TEXT NOT NULL, created_at REAL NOT NULL,"
            " updated_at REAL NOT NULL, holder TEXT, lease_expires_at REAL, epoch INTEGER NOT NULL)"
        )
        conn.execute(
            "INSERT INTO agentloops_runs VALUES ('old', 'react', 'running', '{}', 1, 1,"
            " 'someone', 4102444800, 1)"  # held until 2100
        )
    with SQLiteStore(path) as store:
        with pytest.raises(RunLeased):
            store.acquire("old", ttl=30)
        assert store.break_lease("old") is True
        lease = store.acquire("old", ttl=30)
        assert lease.epoch == 3
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT version FROM agentloops_schema").fetchone() == (2,)
        assert conn.execute("SELECT lease_ttl FROM agentloops_runs").fetchone() == (30.0,)
