"""Checkpointers: the protocol, in memory and in SQLite (threads, processes, bad files)."""

from __future__ import annotations

import json
import pickle
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentloops import Checkpointer, CheckpointError, MemoryCheckpointer, SQLiteCheckpointer
from agentloops.checkpoint import SCHEMA_VERSION

Factory = Callable[[Path], Checkpointer]
STORES: list[Factory] = [
    lambda tmp: MemoryCheckpointer(),
    lambda tmp: SQLiteCheckpointer(tmp / "runs.db"),
]
IDS = ["memory", "sqlite"]


@pytest.fixture(params=STORES, ids=IDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Checkpointer:
    factory: Factory = request.param
    return factory(tmp_path)


def test_both_satisfy_the_protocol(store: Checkpointer) -> None:
    assert isinstance(store, Checkpointer)


def test_save_load_replace_delete(store: Checkpointer) -> None:
    assert store.load("r1") is None
    store.save("r1", {"step": 1, "nested": {"a": [1, "x", None, True]}})
    store.save("r2", {"step": 9})
    assert store.load("r1") == {"step": 1, "nested": {"a": [1, "x", None, True]}}
    store.save("r1", {"step": 2})
    assert store.load("r1") == {"step": 2}
    assert sorted(store.list_runs()) == ["r1", "r2"]
    store.delete("r1")
    store.delete("never-saved")
    assert store.load("r1") is None
    assert store.list_runs() == ["r2"]


def test_a_loaded_state_is_a_copy(store: Checkpointer) -> None:
    state = {"items": [1]}
    store.save("r", state)
    state["items"].append(2)
    loaded = store.load("r")
    assert loaded == {"items": [1]}
    loaded["items"].append(3)  # type: ignore[index]
    assert store.load("r") == {"items": [1]}


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"when": object()}, "not JSON"),
        ({"x": float("nan")}, "not JSON"),
        (["a", "list"], "must be a dict"),
    ],
)
def test_a_state_that_is_not_a_json_object_is_refused(
    store: Checkpointer, state: object, message: str
) -> None:
    with pytest.raises(CheckpointError, match=message) as caught:
        store.save("bad", state)  # type: ignore[arg-type]
    assert caught.value.run_id == "bad"
    assert store.load("bad") is None


def test_memory_list_runs_is_oldest_save_first() -> None:
    store = MemoryCheckpointer()
    for run_id in ("b", "a", "c"):
        store.save(run_id, {})
    store.save("b", {"again": True})
    assert store.list_runs() == ["a", "c", "b"]


def test_sqlite_file_is_wal_versioned_and_survives_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SQLiteCheckpointer(path) as first:
        first.save("r", {"ok": True})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert SQLiteCheckpointer(path).load("r") == {"ok": True}


def test_sqlite_reopens_after_close_and_pickles(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    store.save("r", {"n": 1})
    store.close()
    store.save("r2", {"n": 2})  # a closed checkpointer opens a new connection
    copy = pickle.loads(pickle.dumps(store))
    assert copy.load("r") == {"n": 1}
    assert copy.path == store.path


def corrupt(path: Path, run_id: str, sql_value: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE runs SET state = {sql_value} WHERE run_id = ?", (run_id,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "sql_value",
    ["'{\"truncated\": '", "'[1, 2]'", "x'ff fe 00'", "42", "'null'"],
    ids=["truncated", "array", "invalid-utf8", "integer", "null"],
)
def test_a_corrupted_row_names_its_run_and_spares_the_others(
    tmp_path: Path, sql_value: str
) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteCheckpointer(path)
    store.save("good", {"n": 1})
    store.save("broken", {"n": 2})
    corrupt(path, "broken", sql_value.replace(" ", ""))
    with pytest.raises(CheckpointError, match=r"'broken'.*corrupted") as caught:
        store.load("broken")
    assert caught.value.run_id == "broken"
    assert store.load("good") == {"n": 1}
    assert sorted(store.list_runs()) == ["broken", "good"]
    store.save("broken", {"n": 3})  # a new save repairs the row
    assert store.load("broken") == {"n": 3}


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteCheckpointer(path).save("r", {"n": 1})
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(CheckpointError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        SQLiteCheckpointer(path)


def test_a_file_that_is_not_a_database_is_a_checkpoint_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CheckpointError, match="cannot open checkpoints"):
        SQLiteCheckpointer(path)


def test_concurrent_saves_from_threads_lose_nothing(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            barrier.wait()
            for n in range(40):
                store.save(f"w{worker}-{n}", {"worker": worker, "n": n})
                store.save("shared", {"worker": worker, "n": n})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.list_runs()) == 8 * 40 + 1
    assert all(
        store.load(f"w{w}-{n}") == {"worker": w, "n": n} for w in range(8) for n in range(40)
    )
    assert store.load("shared") in [{"worker": w, "n": 39} for w in range(8)]


WRITER = textwrap.dedent(
    """
    import sys
    from agentloops import SQLiteCheckpointer
    store = SQLiteCheckpointer(sys.argv[1], timeout=30)
    name = sys.argv[2]
    for n in range(150):
        store.save(f"{name}-{n}", {"n": n, "by": name})
        store.save("shared", {"n": n, "by": name})
    print(len(store.list_runs()))
    """
)


def test_two_processes_write_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SQLiteCheckpointer(path)  # create the schema once, so both children only write
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert int(out) >= 150 + 1  # it saw at least its own runs
    store = SQLiteCheckpointer(path)
    assert len(store.list_runs()) == 2 * 150 + 1
    assert store.load("a-149") == {"n": 149, "by": "a"}
    assert store.load("b-0") == {"n": 0, "by": "b"}
    assert json.dumps(store.load("shared"))  # whichever wrote last, it is whole


def test_a_failing_write_is_a_checkpoint_error_and_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(path)
    store.save("kept", {"n": 1})
    with sqlite3.connect(path) as conn:  # the database refuses a new row, as a full disk would
        conn.execute(
            "CREATE TRIGGER no_more BEFORE INSERT ON runs WHEN NEW.run_id = 'new' "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    with pytest.raises(CheckpointError, match="could not save run 'new': disk full") as caught:
        store.save("new", {"n": 2})
    assert caught.value.run_id == "new"
    assert store.load("kept") == {"n": 1} and store.load("new") is None
    store.save("kept", {"n": 3})  # the connection is usable again: the transaction rolled back
    assert store.load("kept") == {"n": 3}


def test_a_write_sqlite_already_rolled_back_reports_its_own_error(tmp_path: Path) -> None:
    # On a full disk SQLite may roll the whole transaction back itself; RAISE(ROLLBACK)
    # does the same. The error must name that cause, not a failed second rollback.
    path = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(path)
    store.save("kept", {"n": 1})
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER full BEFORE INSERT ON runs WHEN NEW.run_id = 'new' "
            "BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END"
        )
    with pytest.raises(CheckpointError) as caught:
        store.save("new", {"n": 2})
    assert "could not save run 'new': database or disk is full" in str(caught.value)
    assert "cannot rollback" not in str(caught.value)
    store.save("kept", {"n": 3})
    assert store.load("kept") == {"n": 3} and store.load("new") is None


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE")
def test_a_disk_that_fills_mid_save_names_the_io_error(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import resource, signal
        from agentloops import CheckpointError, SQLiteCheckpointer
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        store = SQLiteCheckpointer({str(tmp_path / "runs.sqlite")!r})
        store.save("kept", {{"n": 1}})
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # the disk fills up
        try:
            store.save("big", {{"pad": "x" * 1_000_000}})
        except CheckpointError as exc:
            print(exc)
        print(store.load("kept"), store.load("big"))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    error, loaded = out.stdout.splitlines()
    assert "could not save run 'big': disk I/O error" in error, error
    assert "cannot rollback" not in error
    assert loaded == "{'n': 1} None"
