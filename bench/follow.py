"""`store.follow` latency: from an append's commit in one process to the record's delivery
to a follower in another, on memory (a thread, the same store), SQLite (polling:
`follow_poll` 50 ms, the default, and 5 ms) and PostgreSQL (LISTEN/NOTIFY).

A writer appends N records of a ReAct step's size, one transaction each, with a pause
between them: 5 ms (a busy run) or 100 ms (a run waiting on a model: the SQLite poll
has backed off by then). Each record carries the wall-clock time its append returned;
the follower notes the time it got it (one machine: one clock). Reported: the median,
90th percentile and worst delay from commit to delivery, in milliseconds. Cases are
interleaved by round so machine noise hits them alike.

    python bench/follow.py [--quick]
    .ci/with-postgres python bench/follow.py    # with PostgreSQL (AGENTLOOPS_TEST_POSTGRES)
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from journal import postgres_database
from machine import describe

from agentloops.journal import MemoryStore, PostgresStore, RunStore, SQLiteStore

GAPS = (0.005, 0.1)
STEP = {"response": {"message": {"role": "assistant", "content": [{"text": "x" * 180}]}}}
"""About a ReAct step's size of JSON."""


def open_store(backend: str, target: str, poll: float) -> RunStore:
    if backend == "sqlite":
        return SQLiteStore(target, follow_poll=poll)
    return PostgresStore(target)


def follower(backend: str, target: str, run_id: str, poll: float) -> None:
    """The follower process: "ready" once it has record 1, then one JSON line of
    `[seq, when it came]` pairs after the record that ends the drive."""
    store = open_store(backend, target, poll)
    got = []
    for record in store.follow(run_id, timeout=60):
        got.append((record.seq, time.time()))
        if record.seq == 1:
            print("ready", flush=True)
    print(json.dumps(got), flush=True)


def write(store: RunStore, run_id: str, n: int, gap: float, sent: Callable[[float], None]) -> None:
    """Append n records (after the follower's "ready" record 1), then the result."""
    lease = store.acquire(run_id, ttl=300)
    for i in range(n):
        time.sleep(gap)
        store.append(lease, "model", {**STEP, "step": i})
        sent(time.time())  # the append has returned: the record is committed
    store.append(lease, "result", {"stop_reason": "answered", "answer": ""}, status="finished")
    store.release(lease)


def across_processes(backend: str, target: str, poll: float, n: int, gap: float) -> list[float]:
    store = open_store(backend, target, poll)
    run_id = f"follow-{secrets.token_hex(4)}"
    lease = store.start(run_id, kind="react", ttl=300)
    store.append(lease, "event", {"event": "ready"})
    store.release(lease)
    script = [sys.executable, __file__, "--follower", backend, target, run_id, str(poll)]
    child = subprocess.Popen(script, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    returned: list[float] = []
    write(store, run_id, n, gap, returned.append)
    got = json.loads(child.stdout.readline())
    child.wait(timeout=60)
    delivered = [at for seq, at in got if 2 <= seq <= n + 1]
    assert len(delivered) == n, (len(delivered), n)
    return [(d - r) * 1000 for d, r in zip(delivered, returned, strict=True)]


def in_memory(n: int, gap: float) -> list[float]:
    store = MemoryStore()
    run_id = "follow"
    lease = store.start(run_id, kind="react", ttl=300)
    store.release(lease)
    delivered: list[float] = []

    def follow() -> None:
        for record in store.follow(run_id, timeout=60):
            if record.kind == "model":
                delivered.append(time.time())

    thread = threading.Thread(target=follow)
    thread.start()
    returned: list[float] = []
    write(store, run_id, n, gap, returned.append)
    thread.join(60)
    return [(d - r) * 1000 for d, r in zip(delivered, returned, strict=True)]


def summary(delays: list[float]) -> str:
    ordered = sorted(delays)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"{statistics.median(ordered):.2f} / {p90:.2f} / {ordered[-1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 records per case, not 100")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    n = 30 if args.quick else 100
    print(describe())
    with tempfile.TemporaryDirectory() as tmp, contextmanager(_postgres)() as conninfo:
        path = str(Path(tmp) / "runs.db")
        SQLiteStore(path).close()
        cases: dict[str, Callable[[float], list[float]]] = {
            "MemoryStore (a thread)": lambda gap: in_memory(n, gap),
            "SQLiteStore, follow_poll 50 ms (default)": lambda gap: across_processes(
                "sqlite", path, 0.05, n, gap
            ),
            "SQLiteStore, follow_poll 5 ms": lambda gap: across_processes(
                "sqlite", path, 0.005, n, gap
            ),
        }
        if conninfo:
            cases["PostgresStore (LISTEN/NOTIFY)"] = lambda gap: across_processes(
                "postgres", conninfo, 0.05, n, gap
            )
        else:
            print("PostgreSQL skipped: AGENTLOOPS_TEST_POSTGRES is unset (see .ci/with-postgres)")
        delays: dict[tuple[str, float], list[float]] = {}
        for _ in range(args.rounds):
            for gap in GAPS:
                for name, case in cases.items():
                    delays.setdefault((name, gap), []).extend(case(gap))
    print(f"\n{n} records per case and round, {args.rounds} rounds; one process appends,")
    print("another follows (MemoryStore: a thread); ms from the append's return to delivery,")
    print("median / p90 / worst\n")
    print("| store | 5 ms between appends | 100 ms between appends |")
    print("|---|---|---|")
    for name in cases:
        cells = " | ".join(summary(delays[(name, gap)]) for gap in GAPS)
        print(f"| {name} | {cells} |")


def _postgres() -> Iterator[str]:
    server = os.environ.get("AGENTLOOPS_TEST_POSTGRES")
    if not server:
        yield ""
        return
    with postgres_database(server) as conninfo:
        yield conninfo


if __name__ == "__main__":
    if sys.argv[1:2] == ["--follower"]:
        follower(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    else:
        main()
