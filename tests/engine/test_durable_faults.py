"""Durable runs of the three loops under real faults: processes killed with SIGKILL at every
effect boundary and resumed in another process, two processes resuming (or approving) one
run at once, and a lease holder suspended with SIGSTOP while another takes its run over.
On SQLite, and on PostgreSQL when AGENTLOOPS_TEST_POSTGRES names a server.

The runs happen in processes forked from a zygote (tests/_durable_worker.py, which also
holds the loops, their deterministic models and their ledger tools); this process reads
the journals through its own store.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentloops.journal import JournalRecord, PostgresStore, RunStore, SQLiteStore

WORKER = Path(__file__).parents[1] / "_durable_worker.py"
LOOPS = ["react", "rewoo", "pe"]
DRIVERS = ["sync", "async"]
KILLED_TTL = 1.0
"""The lease of a process that is killed or suspended: how long a take-over waits. Short,
but not so short that a busy machine lets it lapse while the run is still going."""
WIDTH = 4
"""How many runs to kill at once (more, on two cores, and the store's write lock queues
long enough for a short lease to lapse mid-run: that is a `LeaseLost`, not a kill)."""

pytestmark = pytest.mark.slow


class Zygote:
    """The worker process that forks one child per job (see tests/_durable_worker.py)."""

    def __init__(self, backend: str, where: str):
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), backend, where],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.ask_raw(timeout=60)  # {"ready": pid}

    def ask_raw(self, command: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"the zygote did not answer within {timeout}s"
        line = self.proc.stdout.readline()
        assert line, f"the zygote exited with {self.proc.wait()}"
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()


@dataclass
class Child:
    """A forked job: its pid and its files."""

    pid: int
    spec: dict[str, Any]
    exit: dict[str, Any] | None = None

    @property
    def out(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(Path(self.spec["out"]).read_text())
        return data

    @property
    def log(self) -> list[dict[str, Any]]:
        path = Path(self.spec["log"])
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def tools_run(self) -> Counter[str]:
        """The journal key of each call that ran (`journal_key`)."""
        return Counter(journal_key(line["key"]) for line in self.log if line["event"] == "tool")

    def models_run(self) -> int:
        return sum(line["event"] == "model" for line in self.log)

    def validators_run(self) -> int:
        return sum(line["event"] == "validator" for line in self.log)


def journal_key(key: str) -> str:
    """A call's key in its run's journal, from the idempotency key its tool saw (the journal
    key, `@`, the run's nonce). A ledger keeps whole keys: were the nonce to change between
    the sessions of one run, a call run twice would be in it twice, as two journal keys."""
    return key.partition("@")[0]


class Fleet:
    """Jobs of one test: spawned through the zygote, with their files under `tmp`."""

    def __init__(self, zygote: Zygote, store: RunStore, tmp: Path):
        self.zygote = zygote
        self.store = store
        self.tmp = tmp
        self.children: list[Child] = []

    def spawn(self, loop: str, op: str, run_id: str, **options: Any) -> Child:
        name = f"{run_id}-{op}-{len(self.children)}"
        spec = {
            "loop": loop,
            "op": op,
            "run_id": run_id,
            "ledger": str(self.tmp / f"{run_id}.ledger"),
            "log": str(self.tmp / f"{name}.log"),
            "out": str(self.tmp / f"{name}.json"),
            **options,
        }
        pid = self.zygote.ask_raw({"op": "spawn", "job": spec})["pid"]
        self.children.append(Child(pid, spec))
        return self.children[-1]

    def wait(self, *children: Child, timeout: float = 30) -> None:
        for child in children:
            child.exit = self.zygote.ask_raw(
                {"op": "wait", "pid": child.pid, "timeout": timeout}, timeout=timeout + 5
            )
            assert "timeout" not in child.exit, f"job {child.spec} still running"

    def finish(self, loop: str, op: str, run_id: str, **options: Any) -> Child:
        child = self.spawn(loop, op, run_id, **options)
        self.wait(child)
        assert child.exit == {"code": 0}, (child.exit, child.out)
        return child

    def ledger(self, run_id: str) -> Counter[str]:
        path = self.tmp / f"{run_id}.ledger"
        lines = path.read_text().splitlines() if path.exists() else []
        keys = (journal_key(json.loads(line)["key"]) for line in lines)
        return Counter(key.replace(run_id, "RUN") for key in keys)

    def stop_all(self) -> None:
        for child in self.children:
            if child.exit is None:
                with _suppress_gone():
                    os.kill(child.pid, signal.SIGKILL)
                    os.kill(child.pid, signal.SIGCONT)
                self.wait(child)


class _suppress_gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, *rest: Any) -> bool:
        return kind is ProcessLookupError


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunStore, Zygote]]:
    """A store of each backend, read from this process, and a zygote whose jobs use it."""
    if request.param == "sqlite":
        where = str(tmp_path_factory.mktemp("faults") / "runs.db")
        store: RunStore = SQLiteStore(where)
    else:
        where = request.getfixturevalue("postgres_conninfo")
        store = PostgresStore(where)
    zygote = Zygote(request.param, where)
    try:
        yield store, zygote
    finally:
        zygote.close()
        store.close()  # type: ignore[attr-defined]


@pytest.fixture
def fleet(backend: tuple[RunStore, Zygote], tmp_path: Path) -> Iterator[Fleet]:
    store, zygote = backend
    jobs = Fleet(zygote, store, tmp_path)
    try:
        yield jobs
    finally:
        jobs.stop_all()


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@dataclass
class Reference:
    """An uninterrupted run: what every interrupted one must come to."""

    result: dict[str, Any]
    writes: list[int]
    tools: Counter[str]
    models: int
    ledger: Counter[str]
    validators: int


def reference(fleet: Fleet, loop: str, task: str | None = None) -> Reference:
    run_id = new_id(f"ref-{loop}")
    child = fleet.finish(loop, "run", run_id, task=task)
    out = child.out
    assert out["ok"], out
    tools = Counter(k.replace(run_id, "RUN") for k in child.tools_run().elements())
    ledger = fleet.ledger(run_id)
    assert tools == ledger and set(ledger.values()) == {1}  # every call ran once, recorded once
    validators = child.validators_run()
    return Reference(out["result"], out["writes"], tools, child.models_run(), ledger, validators)


# -- SIGKILL at every effect boundary -----------------------------------------------------------


def kill_points(ref: Reference) -> list[tuple[str, int, str]]:
    writes = [
        ("write", n, when) for n in range(1, len(ref.writes) + 1) for when in ("before", "after")
    ]
    calls = sum(ref.tools.values())
    tools = [("tool", n, when) for n in range(1, calls + 1) for when in ("before", "after")]
    return writes + tools


def kill_event(at: str, n: int, when: str) -> dict[str, Any]:
    return {"event": "killed", "at": at, "n": n, "when": when}


@pytest.mark.parametrize("loop", [*LOOPS, "typed"])  # typed: a typed ReAct run (issue 21)
def test_a_run_killed_at_any_effect_boundary_resumes_to_the_same_end_with_every_effect_once(
    fleet: Fleet, loop: str
) -> None:
    ref = reference(fleet, loop)
    points = kill_points(ref)
    killed: dict[str, tuple[tuple[str, int, str], Child]] = {}
    snapshots: dict[str, list[JournalRecord]] = {}
    resumed: dict[str, Child] = {}
    for i in range(0, len(points), WIDTH):  # a few at a time
        batch = {}
        for j, (at, n, when) in enumerate(points[i : i + WIDTH], i):
            run_id = new_id(f"{loop}-{at}{n}{when}")
            kill = {"at": at, "n": n, "when": when}
            driver = DRIVERS[j // 2 % 2]  # by turns, each point killed under one driver
            child = fleet.spawn(loop, "run", run_id, kill=kill, ttl=KILLED_TTL, driver=driver)
            batch[run_id] = ((at, n, when), child)
        fleet.wait(*(child for _, child in batch.values()))
        killed.update(batch)
        for run_id, ((at, n, when), child) in batch.items():
            if child.exit != {"signal": signal.SIGKILL}:
                pytest.fail(f"not killed at {at} {n} {when}: {child.exit} {child.out}")
            assert {**kill_event(at, n, when), "pid": child.pid} in child.log
            snapshots[run_id] = fleet.store.read(run_id)
            if at == "write":  # the journal holds exactly the writes that were committed
                # (the sizes this child wrote: where the milestones of parallel steps fall
                # depends on which call finishes first)
                committed = n - 1 if when == "before" else n
                sizes = {e["n"]: e["records"] for e in child.log if e["event"] == "write"}
                assert len(snapshots[run_id]) == sum(sizes[k] for k in range(1, committed + 1))
            # Resumed in another process, under the other driver, once the dead holder's
            # lease lapses (retrying on RunLeased until then); meanwhile the next batch runs.
            other = DRIVERS[1 - DRIVERS.index(child.spec["driver"])]
            resumed[run_id] = fleet.spawn(
                loop, "resume", run_id, wait=15, answer_doubt=True, driver=other
            )
    fleet.wait(*resumed.values())
    for run_id, child in resumed.items():
        point, first = killed[run_id]
        check_resumed(fleet, ref, run_id, point, snapshots[run_id], first, child)


def check_resumed(
    fleet: Fleet,
    ref: Reference,
    run_id: str,
    point: tuple[str, int, str],
    before: list[JournalRecord],
    killed: Child,
    resumed: Child,
) -> None:
    assert resumed.exit == {"code": 0}, point
    out = resumed.out
    assert out.get("ok"), (point, out)
    assert out["result"] == ref.result, point  # the same transcript, plan, evidence, results
    # Nothing recorded is lost: the journal before the kill is the start of the journal now.
    assert fleet.store.read(run_id)[: len(before)] == before, point
    # Every key is in the ledger exactly once.
    assert fleet.ledger(run_id) == ref.ledger, point
    started = {r.key: r.data for r in before if r.kind == "tool_started"}
    finished = {r.key for r in before if r.kind == "tool_finished"}
    in_doubt = {k: d for k, d in started.items() if k not in finished}
    # No call ran before its start was journaled, and none ran twice in one process.
    assert set(killed.tools_run()) <= set(started), point
    assert set(killed.tools_run().values()) <= {1}, point
    # What was recorded is replayed, not redone: the resumed process ran each call without
    # a recorded outcome once, and asked the model only what the journal did not answer.
    not_done = Counter({k: 1 for k in ref.tools if k.replace("RUN", run_id) not in finished})
    ran = Counter(k.replace(run_id, "RUN") for k in resumed.tools_run().elements())
    assert ran == not_done, point
    recorded_models = sum(r.kind == "model" for r in before)
    assert resumed.models_run() == ref.models - recorded_models, point
    assert killed.models_run() - recorded_models in (0, 1), point  # at most one lost reply
    # An output validator's verdict is replayed too: only the unrecorded ones run again.
    recorded_checks = sum(r.kind == "output_checked" for r in before)
    assert resumed.validators_run() == ref.validators - recorded_checks, point
    # A person was asked about exactly the calls in doubt whose tool says "ask".
    asked = sorted(d["id"] for d in in_doubt.values() if d["name"] == "debit")
    assert sorted(out["doubts"]) == asked, point


# -- two processes at once -----------------------------------------------------------------------

CLEAN_KILL = {
    "react": ("write", 4, "before"),  # after the first turn's results: the second turn to run
    "rewoo": ("write", 1, "after"),  # the plan and the first two starts recorded, nothing ran
    "pe": ("write", 5, "before"),  # after step 1: steps 2 and 3 to run
}


def interrupt(fleet: Fleet, loop: str) -> tuple[str, Child]:
    """A run killed at `CLEAN_KILL[loop]` (its lease still to lapse)."""
    run_id = new_id(f"race-{loop}")
    at, n, when = CLEAN_KILL[loop]
    child = fleet.spawn(loop, "run", run_id, kill={"at": at, "n": n, "when": when}, ttl=KILLED_TTL)
    return run_id, child


def lapsed(fleet: Fleet, run_id: str, killed: Child) -> list[JournalRecord]:
    """The journal of the killed run, once its lease lapsed."""
    fleet.wait(killed)
    assert killed.exit == {"signal": signal.SIGKILL}
    wait_until(lambda: not fleet.store.run_info(run_id).leased)
    return fleet.store.read(run_id)


def race(fleet: Fleet, loop: str, run_id: str, **options: Any) -> tuple[Child, Child]:
    """Two processes resuming `run_id` at the same moment; (the driver, the other)."""
    start_at = time.time() + 0.3
    pair = [
        fleet.spawn(loop, "resume", run_id, start_at=start_at, driver=driver, **options)
        for driver in DRIVERS  # one on each driver
    ]
    fleet.wait(*pair)
    assert [c.exit for c in pair] == [{"code": 0}] * 2
    drove = [c for c in pair if c.out.get("ok")]
    assert len(drove) == 1, [c.out for c in pair]
    other = pair[1] if drove[0] is pair[0] else pair[0]
    return drove[0], other


@pytest.mark.parametrize("loop", LOOPS)
def test_two_processes_resuming_one_run_at_once_one_drives_the_other_is_refused(
    fleet: Fleet, loop: str
) -> None:
    run_id, killed = interrupt(fleet, loop)
    ref = reference(fleet, loop)  # meanwhile, the killed run's lease lapses
    before = lapsed(fleet, run_id, killed)
    finished = {r.key for r in before if r.kind == "tool_finished"}
    drove, other = race(fleet, loop, run_id, slow=0.3)  # its first call holds the run a while
    assert other.out["error"] == "RunLeased", other.out
    assert f":{drove.pid}:" in other.out["holder"]  # it names the process that drives
    assert drove.out["result"] == ref.result
    assert other.tools_run() == Counter() and other.models_run() == 0
    not_done = Counter({k: 1 for k in ref.tools if k.replace("RUN", run_id) not in finished})
    assert Counter(k.replace(run_id, "RUN") for k in drove.tools_run().elements()) == not_done
    assert fleet.ledger(run_id) == ref.ledger  # every tool ran once


PAY = {"react": "p1", "pe": "s1"}


@pytest.mark.parametrize("loop", sorted(PAY))
def test_two_processes_approving_one_pause_at_once_run_the_call_once(
    fleet: Fleet, loop: str
) -> None:
    run_id = new_id(f"pay-{loop}")
    paused = fleet.finish(loop, "run", run_id, task="Pay the invoice.").out
    assert paused["result"]["stop_reason"] == "approval_required", paused
    assert paused["result"]["pending"] == [PAY[loop]]
    decisions = {PAY[loop]: True}
    drove, other = race(fleet, loop, run_id, decisions=decisions, slow=0.3)
    # The other got RunLeased, or (had it come after the driver was done) the same result.
    assert other.out.get("error") == "RunLeased" or other.out["result"] == drove.out["result"]
    assert drove.out["result"]["stop_reason"] == "answered"
    again = fleet.finish(loop, "resume", run_id, decisions=decisions).out  # a late approver
    assert again["result"] == drove.out["result"]
    key = "RUN:p1" if loop == "react" else "RUN.1:s1"
    assert fleet.ledger(run_id) == Counter({key: 1})
    ran = [c.tools_run() for c in fleet.children]
    assert sum(ran, Counter()) == Counter({key.replace("RUN", run_id): 1})  # ran once, anywhere
    decided = [r for r in fleet.store.read(run_id) if r.kind == "decision"]
    assert len(decided) == 1 and decided[0].data["approved"] is True


@pytest.mark.parametrize("loop", sorted(PAY))
def test_an_approved_call_killed_mid_flight_is_asked_about_again(fleet: Fleet, loop: str) -> None:
    run_id = new_id(f"doubt-{loop}")
    fleet.finish(loop, "run", run_id, task="Pay the invoice.")
    decisions = {PAY[loop]: True}
    kill = {"at": "tool", "n": 1, "when": "after"}  # paid, and died before it was recorded
    approver = fleet.spawn(loop, "resume", run_id, decisions=decisions, kill=kill, ttl=KILLED_TTL)
    fleet.wait(approver)
    assert approver.exit == {"signal": signal.SIGKILL}
    asked = fleet.finish(loop, "resume", run_id, wait=15).out  # no decision: it must ask
    assert asked["error"] == "CallInDoubt" and asked["calls"] == [PAY[loop]], asked
    mixed = fleet.finish(loop, "resume", run_id, decisions=decisions).out  # "approve all"
    assert mixed["error"] == "DecisionRefused" and "'rerun'" in mixed["message"], mixed
    rerun = {PAY[loop]: "rerun"}
    done = fleet.finish(loop, "resume", run_id, decisions=rerun).out  # yes, run it again
    assert done["result"]["stop_reason"] == "answered", done
    key = "RUN:p1" if loop == "react" else "RUN.1:s1"
    assert fleet.ledger(run_id) == Counter({key: 1})  # run twice, paid once: it dedupes
    kinds = [r.kind for r in fleet.store.read(run_id)]
    assert kinds.count("decision") == 1 and kinds.count("doubt_decision") == 1


# -- SIGSTOP past the lease ----------------------------------------------------------------------


def suspend(pid: int, store: RunStore, ledger: Path) -> None:
    """SIGSTOP `pid` at a moment it holds no lock another process would wait for.

    A process suspended inside a write transaction (its lease keeper renewing, another
    thread journaling) keeps SQLite's one write lock, and one suspended while another of
    its tool threads writes the ledger keeps the ledger's lock: every other process then
    waits. That is the nature of locks, not what this test is about, so the holder is let
    go on and stopped again until both are free.
    """
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "T")
        sqlite_free = not isinstance(store, SQLiteStore) or _write_lock_free(store)
        if sqlite_free and _ledger_free(ledger):
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.005)
    pytest.fail(f"process {pid} kept a lock")


def _ledger_free(path: Path) -> bool:
    with open(path, "a") as ledger:
        try:
            fcntl.flock(ledger, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(ledger, fcntl.LOCK_UN)
        return True


def _write_lock_free(store: SQLiteStore) -> bool:
    conn = sqlite3.connect(store.path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_a_holder_suspended_past_its_lease_cannot_append_after_a_take_over(
    fleet: Fleet, loop: str
) -> None:
    run_id = new_id(f"stop-{loop}")
    marker, go = fleet.tmp / f"{run_id}.inside", fleet.tmp / f"{run_id}.go"
    stall = {"n": 1, "marker": str(marker), "go": str(go)}
    driver = DRIVERS[LOOPS.index(loop) % 2]  # react and pe held by the sync driver, rewoo async
    holder = fleet.spawn(loop, "run", run_id, ttl=KILLED_TTL, stall=stall, driver=driver)
    wait_until(marker.exists)  # inside its first tool call, holding the lease
    suspend(holder.pid, fleet.store, fleet.tmp / f"{run_id}.ledger")
    try:
        ref = reference(fleet, loop)  # meanwhile, the stopped holder's lease lapses
        wait_until(lambda: not fleet.store.run_info(run_id).leased)
        before = fleet.store.read(run_id)
        taker = fleet.finish(loop, "resume", run_id, wait=15, answer_doubt=True)
        assert taker.out["result"] == ref.result, taker.out
        after_take_over = fleet.store.read(run_id)
    finally:
        go.touch()
        os.kill(holder.pid, signal.SIGCONT)
    fleet.wait(holder)
    assert holder.exit == {"code": 0}
    assert holder.out["error"] == "LeaseLost", holder.out
    assert after_take_over[: len(before)] == before
    # The woken holder wrote nothing: every record from the take-over on is the taker's.
    assert fleet.store.read(run_id) == after_take_over
    assert fleet.store.run_info(run_id).status == "finished"
    assert fleet.ledger(run_id) == ref.ledger
