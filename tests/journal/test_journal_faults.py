"""Run store faults with real processes (tests/_journal_worker.py), on SQLite and PostgreSQL:
two processes racing for one run, a holder suspended (SIGSTOP) past its lease while another
takes over, and a holder killed (SIGKILL) whose lease lapses."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloops import PostgresStore, RunLeased, SQLiteStore
from agentloops.journal import RunStore

WORKER = Path(__file__).parents[1] / "_journal_worker.py"
Target = tuple[str, str]


class Worker:
    """One worker process, talked to in JSON lines."""

    def __init__(self, target: Target):
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), *target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.pid: int = self.read()["ready"]

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"worker {self.proc.pid} did not answer within {timeout}s"
        line = self.proc.stdout.readline()
        assert line, f"worker {self.proc.pid} exited with {self.proc.wait()}"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def ask(self, **command: Any) -> dict[str, Any]:
        self.send(**command)
        return self.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # works on a stopped process too
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        path = tmp_path / "runs.db"
        SQLiteStore(path).close()  # create the tables before the workers race to
        return ("sqlite", str(path))
    return ("postgres", request.getfixturevalue("postgres_conninfo"))


@pytest.fixture
def store(target: Target) -> Iterator[RunStore]:
    backend, where = target
    with SQLiteStore(where) if backend == "sqlite" else PostgresStore(where) as local:
        yield local


@pytest.fixture
def spawn(target: Target) -> Iterator[Callable[[], Worker]]:
    workers: list[Worker] = []

    def start() -> Worker:
        workers.append(Worker(target))
        return workers[-1]

    yield start
    for worker in workers:
        worker.kill()


def new_run(store: RunStore, prefix: str) -> str:
    """A fresh, free run (epoch 1, released): the PostgreSQL database is shared per session."""
    run_id = f"{prefix}-{os.urandom(4).hex()}"
    store.release(store.start(run_id, kind="react", ttl=30))
    return run_id


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.slow
def test_two_processes_acquiring_one_run_at_once_have_one_winner(
    store: RunStore, spawn: Callable[[], Worker]
) -> None:
    workers = [spawn(), spawn()]
    for _ in range(3):
        run_id = new_run(store, "race")
        for worker in workers:  # both commands are on their way before either answer is read
            worker.send(op="acquire", run=run_id, ttl=30)
        replies = [worker.read() for worker in workers]
        won = [r for r in replies if r.get("ok")]
        lost = [r for r in replies if not r.get("ok")]
        assert len(won) == 1 and len(lost) == 1, replies
        assert lost[0]["error"] == "RunLeased" and lost[0]["holder"] == won[0]["holder"]
        info = store.run_info(run_id)
        assert (info.holder, info.epoch) == (won[0]["holder"], 2)


@pytest.mark.slow
def test_a_holder_suspended_past_its_lease_cannot_append_after_a_take_over(
    store: RunStore, spawn: Callable[[], Worker]
) -> None:
    run_id = new_run(store, "stopped")
    worker = spawn()
    assert worker.ask(op="acquire", run=run_id, ttl=1.0)["ok"]
    assert worker.ask(op="keep", interval=0.2)["ok"]
    assert worker.ask(op="append", kind="before")["seq"] == 1
    os.kill(worker.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: not store.run_info(run_id).leased)  # its keeper cannot renew
        lease = store.acquire(run_id, ttl=30, holder="taker")
        store.append(lease, "taken")
    finally:
        os.kill(worker.pid, signal.SIGCONT)
    late = worker.ask(op="append", kind="late")
    assert late["error"] == "LeaseLost", late
    assert "'taker' took the run over (epoch 3)" in late["message"]
    lost = worker.ask(op="keeper", wait=5)["lost"]
    assert lost is not None and "'taker' took the run over" in lost
    assert [r.kind for r in store.read(run_id)] == ["before", "taken"]
    assert store.run_info(run_id).holder == "taker"


@pytest.mark.slow
def test_a_killed_holders_lease_lapses_and_the_run_is_taken_over(
    store: RunStore, spawn: Callable[[], Worker]
) -> None:
    run_id = new_run(store, "killed")
    worker = spawn()
    holder = worker.ask(op="acquire", run=run_id, ttl=1.0)["holder"]
    assert worker.ask(op="append", kind="before")["ok"]
    worker.kill()
    with pytest.raises(RunLeased) as caught:  # until its lease lapses, the dead holder has it
        store.acquire(run_id, ttl=30)
    assert caught.value.holder == holder
    taken: list[Any] = []

    def take_over() -> bool:
        try:
            taken.append(store.acquire(run_id, ttl=30, holder="survivor"))
        except RunLeased:
            return False
        return True

    wait_until(take_over)
    assert taken[0].epoch == 3
    assert [r.kind for r in store.read(run_id)] == ["before"]  # nothing recorded is lost
    store.append(taken[0], "after")
    assert [r.seq for r in store.read(run_id)] == [1, 2]
