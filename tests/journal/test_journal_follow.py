"""`RunStore.follow` and `afollow` on every backend: records as they are appended, from
another thread, store object or process; the end of a drive; reattaching after a restart;
a later drive read through; timeouts, deletion and bad arguments. And `read` in pages."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloops import ConfigurationError, RunNotFound, RunStore
from agentloops.journal import DRIVE_ENDS, PostgresStore, SQLiteStore

WORKER = Path(__file__).parents[1] / "_follow_worker.py"


@pytest.fixture
def store(durable_store: RunStore) -> RunStore:
    return durable_store


@pytest.fixture
def twin(store: RunStore) -> Iterator[RunStore]:
    """Another store object on the same data (a second process's view, for SQL stores)."""
    if isinstance(store, SQLiteStore):
        with SQLiteStore(store.path) as other:
            yield other
    elif isinstance(store, PostgresStore):
        with PostgresStore(store.conninfo) as other_pg:
            yield other_pg
    else:
        yield store


def seqs(records: Any) -> list[tuple[int, str]]:
    return [(r.seq, r.kind) for r in records]


def test_a_drive_ends_with_a_result_or_a_failure() -> None:
    assert {"result", "failed"} == DRIVE_ENDS


def test_follow_gives_what_is_there_and_ends_with_the_drive(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {}), ("tool_started", {}), ("result", {})])
    assert seqs(store.follow("r1")) == [(1, "model"), (2, "tool_started"), (3, "result")]
    assert seqs(store.follow("r1", after=1)) == [(2, "tool_started"), (3, "result")]


def test_follow_gives_records_as_another_store_object_appends_them(
    store: RunStore, twin: RunStore
) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    writer = twin
    seen: list[tuple[int, str, bool]] = []
    step = threading.Event()

    def write() -> None:
        for kind in ("model", "tool_started", "tool_finished"):
            writer.append(lease, kind, {})
            assert step.wait(10)
            step.clear()
        writer.append(lease, "result", {}, status="finished")

    worker = threading.Thread(target=write)
    worker.start()
    try:
        for record in store.follow("r1", timeout=10):
            # a record arrives while the run goes on: the writer waits for us before the next
            seen.append((record.seq, record.kind, store.run_info("r1").status == "running"))
            step.set()
    finally:
        step.set()
        worker.join(10)
    assert seen == [
        (1, "model", True),
        (2, "tool_started", True),
        (3, "tool_finished", True),
        (4, "result", False),
    ]


def test_reattaching_after_the_last_seen_record(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {}), ("tool_started", {})])
    first = store.follow("r1", timeout=5)
    assert [next(first).seq, next(first).seq] == [1, 2]
    first.close()  # the page went away after seq 2
    store.append_many(lease, [("tool_finished", {}), ("result", {})])
    assert seqs(store.follow("r1", after=2)) == [(3, "tool_finished"), (4, "result")]
    assert list(store.follow("r1", after=4)) == []  # it had seen the end: ends at once


def test_a_later_drive_is_read_through_and_the_last_end_ends_the_stream(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {}), ("failed", {})], status="failed")
    store.append_many(lease, [("model", {}), ("result", {})], status="finished")
    assert [r.kind for r in store.follow("r1")] == ["model", "failed", "model", "result"]


def test_a_run_resumed_after_its_drive_ended_is_followed_from_there(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {}), ("failed", {})], status="failed")
    assert [r.kind for r in store.follow("r1")] == ["model", "failed"]

    def resume() -> None:
        time.sleep(0.2)
        store.append_many(lease, [("model", {}), ("result", {})])

    threading.Thread(target=resume).start()
    kinds = [r.kind for r in store.follow("r1", after=1, timeout=5)]
    assert kinds == ["failed"]  # the drive had ended: a follower from seq 1 stops there
    assert [r.kind for r in store.follow("r1", after=2, timeout=5)] == []
    time.sleep(0.4)  # resumed meanwhile: a follower from the old end reads the new drive
    assert [r.kind for r in store.follow("r1", after=2, timeout=5)] == ["model", "result"]
    assert [r.seq for r in store.follow("r1", after=3)] == [4]
    assert list(store.follow("r1", after=4)) == []


def test_waiting_longer_than_the_timeout_raises(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model", {})
    started = time.monotonic()
    stream = store.follow("r1", timeout=0.3)
    assert next(stream).seq == 1
    with pytest.raises(TimeoutError, match=r"run 'r1': no new record after seq 1 for 0.3 s"):
        next(stream)
    assert 0.25 < time.monotonic() - started < 5


def test_a_run_deleted_while_followed_ends_the_stream_with_run_not_found(
    store: RunStore, twin: RunStore
) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model", {})
    stream = store.follow("r1", timeout=10)
    assert next(stream).seq == 1
    threading.Timer(0.2, lambda: twin.delete("r1", force=True)).start()
    with pytest.raises(RunNotFound):
        next(stream)
    with pytest.raises(RunNotFound):
        next(store.follow("nope"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"after": -1}, "after must be"),
        ({"after": "3"}, "after must be"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": True}, "timeout must be a positive number"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_read(
    store: RunStore, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        store.follow("r1", **kwargs)
    with pytest.raises(ConfigurationError, match=message):
        store.afollow("r1", **kwargs)


def test_afollow_on_the_event_loop_keeps_the_loop_free(store: RunStore, twin: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model", {})
    writer = twin

    async def main() -> tuple[list[int], int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async def write() -> None:
            await asyncio.sleep(0.3)
            await asyncio.to_thread(writer.append, lease, "result", {})

        ticker, writing = asyncio.create_task(tick()), asyncio.create_task(write())
        got = [r.seq async for r in store.afollow("r1", timeout=10)]
        await writing
        ticker.cancel()
        return got, ticks

    got, ticks = asyncio.run(main())
    assert got == [1, 2] and ticks >= 10  # the loop ran while the follower waited


def test_afollow_times_out_and_closes(store: RunStore) -> None:
    store.start("r1", kind="react", ttl=30)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async for _ in store.afollow("r1", timeout=0.2):
                pass

    asyncio.run(main())


def test_a_long_journal_is_read_in_pages_by_a_follower(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {"n": n}) for n in range(600)])
    store.append(lease, "result", {})
    got = [r.seq for r in store.follow("r1")]
    assert got == list(range(1, 602))


def test_read_takes_a_page(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append_many(lease, [("model", {"n": n}) for n in range(5)])
    assert [r.seq for r in store.read("r1", limit=2)] == [1, 2]
    assert [r.seq for r in store.read("r1", after=3, limit=10)] == [4, 5]
    assert store.read("r1", after=5, limit=1) == []
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigurationError, match="limit must be"):
            store.read("r1", limit=bad)


# -- from other processes -------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, str, str]]:
    """A store other processes open too: (store, backend, target)."""
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        with SQLiteStore(path) as sqlite_store:
            yield sqlite_store, "sqlite", str(path)
    else:
        conninfo = request.getfixturevalue("postgres_conninfo")
        with PostgresStore(conninfo) as pg_store:
            with pg_store.connect(autocommit=True) as conn:
                conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
            yield pg_store, "postgres", conninfo


@pytest.fixture
def spawn() -> Iterator[Any]:
    """Start `tests/_follow_worker.py` with arguments; every process is killed, waited for
    and its pipes closed after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.communicate()


def lines(proc: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert proc.stdout is not None
    for line in proc.stdout:
        yield json.loads(line)


def wait_for(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_run_in_another_process_is_followed_live_to_its_end(
    shared: tuple[RunStore, str, str], tmp_path: Path, mode: str, spawn: Any
) -> None:
    store, backend, target = shared
    gate = tmp_path / "gate"
    driver = spawn("drive", backend, target, "live", str(gate))
    wait_for(lambda: any(r.run_id == "live" for r in store.list_runs()))
    kinds: list[str] = []

    def seen(kind: str) -> None:
        kinds.append(kind)
        if kind == "tool_started" and not gate.exists():
            # the record arrived while the run goes on: it waits at the gate until we open it
            assert driver.poll() is None and store.run_info("live").status == "running"
            gate.touch()

    if mode == "sync":
        for record in store.follow("live", timeout=30):
            seen(record.kind)
    else:

        async def collect() -> None:
            async for record in store.afollow("live", timeout=30):
                seen(record.kind)

        asyncio.run(collect())
    assert driver.wait(30) == 0
    assert kinds == [
        "model",
        "tool_started",
        "tool_finished",
        "model",
        "tool_started",
        "tool_finished",
        "model",
        "result",
    ]
    assert kinds == [r.kind for r in store.read("live")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_follower_killed_mid_stream_reattaches_from_the_last_seq_it_saw(
    shared: tuple[RunStore, str, str], tmp_path: Path, mode: str, spawn: Any
) -> None:
    store, backend, target = shared
    gate = tmp_path / "gate"
    driver = spawn("drive", backend, target, "live", str(gate))
    wait_for(lambda: any(r.run_id == "live" for r in store.list_runs()))
    first = spawn("follow", backend, target, "live", "0", mode)
    seen = []
    for item in lines(first):
        seen.append(item["seq"])
        if item["kind"] == "tool_started":
            break
    first.kill()  # the page's server restarted
    first.wait(10)
    gate.touch()  # the run goes on meanwhile
    assert driver.wait(30) == 0
    second = spawn("follow", backend, target, "live", str(seen[-1]), mode)
    rest = list(lines(second))
    assert second.wait(30) == 0
    assert rest[-1] == {"end": True}
    got = seen + [item["seq"] for item in rest[:-1]]
    assert got == [r.seq for r in store.read("live")]  # every record once, none twice
