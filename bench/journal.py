"""Run store cost per journal record: memory, SQLite and PostgreSQL side by side, in one run.

Each case starts a run and appends N records of a ReAct step's size (about 230 bytes of
JSON: an assistant turn asking for one tool call, with usage), one fenced transaction per
record, as a durable driver does; then it reads the journal back, as a resume does. Wall
time, since waiting for the disk is the cost, and this process's CPU time beside it (which
a busy machine does not inflate, but which leaves out the disk and the PostgreSQL server).
Bytes written per record: for SQLite the bytes this process handed to write(2) (WAL frames
and checkpoints, from /proc/self/io); for PostgreSQL the WAL the server generated
(pg_current_wal_lsn); for memory the JSON kept. At 100 and 1,000 records per run: equal
figures per record mean linear growth. Rounds are interleaved so machine noise hits every
case alike; medians are reported.

    python bench/journal.py [--rounds 5]
    .ci/with-postgres python bench/journal.py    # with PostgreSQL (AGENTLOOPS_TEST_POSTGRES)
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from machine import describe

from agentloops.journal import MemoryStore, PostgresStore, RunStore, SQLiteStore

SIZES = (100, 1000)
RECORD: dict[str, Any] = {
    "message": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me add those numbers."},
            {"type": "tool_use", "id": "call_0017", "name": "add", "args": {"a": 17, "b": 1}},
        ],
    },
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 1100},
}


def written_by_this_process() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


class Case:
    """One backend: makes a fresh store per measurement and counts the bytes it writes."""

    def __init__(
        self, name: str, make: Callable[[], RunStore], bytes_written: Callable[[RunStore], int]
    ):
        self.name = name
        self.make = make
        self.bytes_written = bytes_written


def measure(case: Case, n: int) -> dict[str, float]:
    store = case.make()
    lease = store.start(f"bench-{secrets.token_hex(4)}", kind="react", ttl=300)
    store.append(lease, "started", {"task": "warm the connection and the statements"})
    before = case.bytes_written(store)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        store.append(lease, "model", RECORD | {"step": i})
    append_s, append_cpu = time.perf_counter() - start, time.process_time() - cpu
    written = case.bytes_written(store) - before
    start = time.perf_counter()
    assert len(store.read(lease.run_id)) == n + 1
    read_s = time.perf_counter() - start
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return {
        "append_us": append_s / n * 1e6,
        "append_cpu_us": append_cpu / n * 1e6,
        "bytes": written / n,
        "read_us": read_s / (n + 1) * 1e6,
    }


def memory_case() -> Case:
    stores: list[MemoryStore] = []

    def make() -> RunStore:
        stores.append(MemoryStore())
        return stores[-1]

    def json_bytes(store: RunStore) -> int:
        runs = store.list_runs()
        records = [r for run in runs for r in store.read(run.run_id)]
        return sum(len(json.dumps(r.data, separators=(",", ":")).encode()) for r in records)

    return Case("memory", make, json_bytes)


def sqlite_case(directory: Path, synchronous: str) -> Case:
    def make() -> RunStore:
        return SQLiteStore(directory / f"{secrets.token_hex(4)}.db", synchronous=synchronous)  # type: ignore[arg-type]

    return Case(f"SQLite, synchronous={synchronous}", make, lambda store: written_by_this_process())


@contextmanager
def postgres_database(server: str) -> Iterator[str]:
    """A throwaway database on `server`, dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"agentloops_bench_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def postgres_case(conninfo: str) -> Case:
    def wal_position(store: RunStore) -> int:
        assert isinstance(store, PostgresStore)
        with store.connect(autocommit=True) as conn:
            row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')").fetchone()
        assert row is not None
        return int(row[0])

    return Case("PostgreSQL", lambda: PostgresStore(conninfo), wal_position)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(describe())
    server = os.environ.get("AGENTLOOPS_TEST_POSTGRES")
    with tempfile.TemporaryDirectory() as tmp, contextmanager_or_none(server) as conninfo:
        cases = [memory_case(), sqlite_case(Path(tmp), "FULL"), sqlite_case(Path(tmp), "NORMAL")]
        if conninfo is not None:
            cases.append(postgres_case(conninfo))
        else:
            print("PostgreSQL skipped: AGENTLOOPS_TEST_POSTGRES is unset (see .ci/with-postgres)")
        samples: dict[tuple[str, int], list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for n in SIZES:
                for case in cases:
                    samples.setdefault((case.name, n), []).append(measure(case, n))
    print(f"\nmedians of {args.rounds} rounds; one transaction per appended record;")
    print("figures per record, at 100 / 1,000 records per run\n")
    print(
        "| store | append, wall (us) | append, this process's CPU (us) | bytes written "
        "| read back, wall (us) |"
    )
    print("|---|---|---|---|---|")

    def cell(name: str, key: str) -> str:
        small, large = (statistics.median(s[key] for s in samples[(name, n)]) for n in SIZES)
        return f"{small:,.1f} / {large:,.1f}" if small < 1000 else f"{small:,.0f} / {large:,.0f}"

    for case in cases:
        keys = ("append_us", "append_cpu_us", "bytes", "read_us")
        print(f"| {case.name} | {' | '.join(cell(case.name, key) for key in keys)} |")


@contextmanager
def contextmanager_or_none(server: str | None) -> Iterator[str | None]:
    if not server:
        yield None
        return
    with postgres_database(server) as conninfo:
        yield conninfo


if __name__ == "__main__":
    main()
