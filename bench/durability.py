"""The cost of durability per ReAct step: the same job without a store, on each run store,
and on LangGraph with its SQLite checkpointer, side by side in one run.

The job is bench/react_overhead.py's: a zero-latency model that asks for a trivial tool N
times, then answers. Per step: wall time (waiting for the disk is the cost being measured)
and this process's CPU time, both per run / N; and bytes written per step. Bytes written
are what this process handed to write(2) for the SQLite cases, agentloops' and LangGraph's
alike (WAL frames, and checkpoints into the database file; from /proc/self/io), the WAL the
server generated for PostgreSQL, and the JSON kept for MemoryStore. At 100 and 1,000 steps:
equal bytes per step mean the bytes grow linearly with the run. Loops, stores and replies
are built outside the timing; every case is measured in every round, interleaved, and
medians are reported.

    python bench/durability.py [--quick]
    .ci/with-postgres python bench/durability.py    # with PostgreSQL (AGENTLOOPS_TEST_POSTGRES)
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from journal import postgres_database, written_by_this_process
from machine import describe
from peers import missing, prepare_langgraph, versions
from react_overhead import ZeroLatencyModel, add, agentloops_script

from agentloops import ReActLoop
from agentloops.journal import MemoryStore, PostgresStore, RunStore, SQLiteStore

STEPS = (100, 1000)
ROUNDS = {100: 5, 1000: 2}
QUICK_ROUNDS = {100: 2, 1000: 1}
LANGGRAPH_ROUNDS = {100: 3, 1000: 1}
"""Fewer for LangGraph with a checkpointer (a 1,000-step run takes it about 15 s): at most
these many, the last ones."""
GOAL_MS = 1.0
"""The issue's goal: a SQLite journal adds under 1 ms per ReAct step."""
HERE = Path(__file__).resolve().parent


@dataclass
class Trial:
    """One run, ready to time: `run()`, then `written()` bytes since it was built."""

    run: Callable[[], object]
    written: Callable[[], int]
    close: Callable[[], None] = lambda: None


Prepare = Callable[[int, Path], Trial]


def nothing_written() -> Callable[[], int]:
    return lambda: 0


def disk_written() -> Callable[[], int]:
    before = written_by_this_process()
    return lambda: written_by_this_process() - before


def agentloops_trial(steps: int, store: RunStore | None, written: Callable[[], int]) -> Trial:
    loop = ReActLoop(
        ZeroLatencyModel(agentloops_script(steps)), [add], max_steps=steps + 1, store=store
    )
    run_id = f"bench-{secrets.token_hex(4)}"

    def run() -> object:
        result = loop.run("go", run_id=run_id)
        assert result.answer == "done" and result.tool_calls == steps, result.detail
        return result

    close = getattr(store, "close", None) or (lambda: None)
    return Trial(run, written, close)


def no_store(steps: int, tmp: Path) -> Trial:
    return agentloops_trial(steps, None, nothing_written())


def memory_store(steps: int, tmp: Path) -> Trial:
    store = MemoryStore()

    def json_bytes() -> int:
        records = [r for run in store.list_runs() for r in store.read(run.run_id)]
        return sum(len(json.dumps(r.data, separators=(",", ":")).encode()) for r in records)

    return agentloops_trial(steps, store, json_bytes)


def removed(path: Path) -> None:
    """Delete a SQLite file and its WAL: what is deleted need never reach the disk, so one
    case's writes do not slow the next one's fsyncs."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def sqlite_store(synchronous: str) -> Prepare:
    def prepare(steps: int, tmp: Path) -> Trial:
        path = tmp / f"{secrets.token_hex(4)}.db"
        store = SQLiteStore(path, synchronous=synchronous)  # type: ignore[arg-type]
        store.list_runs()  # the tables exist before the timing starts
        trial = agentloops_trial(steps, store, disk_written())
        trial.close = lambda: (store.close(), removed(path))  # type: ignore[func-returns-value]
        return trial

    return prepare


def postgres_store(conninfo: str) -> Prepare:
    def prepare(steps: int, tmp: Path) -> Trial:
        store = PostgresStore(conninfo)

        def wal_position() -> int:
            with store.connect(autocommit=True) as conn:
                row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
                return int(row.fetchone()[0])  # type: ignore[index]

        store.list_runs()
        before = wal_position()
        return agentloops_trial(steps, store, lambda: wal_position() - before)

    return prepare


def langgraph(durability: str | None, checkpointed: bool = True) -> Prepare:
    def prepare(steps: int, tmp: Path) -> Trial:
        if not checkpointed:
            return Trial(prepare_langgraph(steps), nothing_written())
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = tmp / f"{secrets.token_hex(4)}.db"
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()  # its tables (and WAL) before the timing starts
        run = prepare_langgraph(steps, checkpointer=saver, durability=durability)
        return Trial(run, disk_written(), lambda: (conn.close(), removed(path)))  # type: ignore[func-returns-value]

    return prepare


@contextmanager
def postgres_or_none() -> Iterator[str | None]:
    server = os.environ.get("AGENTLOOPS_TEST_POSTGRES")
    if not server:
        yield None
        return
    with postgres_database(server) as conninfo:
        yield conninfo


def cases(conninfo: str | None) -> dict[str, tuple[str, Prepare]]:
    """name -> (framework, prepare)."""
    found: dict[str, tuple[str, Prepare]] = {
        "agentloops, no store": ("agentloops", no_store),
        "agentloops, MemoryStore": ("agentloops", memory_store),
        "agentloops, SQLiteStore (default: synchronous=FULL)": ("agentloops", sqlite_store("FULL")),
        "agentloops, SQLiteStore synchronous=NORMAL": ("agentloops", sqlite_store("NORMAL")),
    }
    if conninfo is not None:
        found["agentloops, PostgresStore"] = ("agentloops", postgres_store(conninfo))
    else:
        print("PostgreSQL skipped: AGENTLOOPS_TEST_POSTGRES is unset (see .ci/with-postgres)")
    why = missing("langgraph")
    if not why and importlib.util.find_spec("langgraph.checkpoint.sqlite") is None:
        why = "langgraph-checkpoint-sqlite is not installed; pip install -e '.[bench]'"
    if why:
        print(f"LangGraph skipped: {why}")
        return found
    found["LangGraph, no checkpointer"] = ("langgraph", langgraph(None, checkpointed=False))
    found["LangGraph, SqliteSaver (default: durability=async)"] = ("langgraph", langgraph("async"))
    found["LangGraph, SqliteSaver durability=sync"] = ("langgraph", langgraph("sync"))
    return found


def measure(
    all_cases: dict[str, tuple[str, Prepare]],
    quick: bool,
    tmp: Path,
    fsyncs: dict[tuple[str, int], list[tuple[float, float]]],
) -> dict:
    """Per case and run length: samples of (wall us, CPU us, bytes) per step, in round
    order. Around each sample of a case that waits for fsync at each commit, the disk's
    fsync time just before and just after it goes to `fsyncs[(case, steps)]` (ms)."""
    samples: dict[str, dict[int, list[tuple[float, float, float]]]] = {n: {} for n in all_cases}
    for _, prepare in all_cases.values():  # warm-up: first-call imports and caches
        trial = prepare(5, tmp)
        trial.run()
        trial.close()
    for steps in STEPS:
        rounds = (QUICK_ROUNDS if quick else ROUNDS)[steps]
        for i in range(rounds):
            for name, (framework, prepare) in all_cases.items():
                # LangGraph checkpointing writes up to 1 GB per 1,000-step run, and the disk
                # is slow to fsync for a while after: its runs come in the last rounds only,
                # after every other case's 1,000-step samples but those of the same round.
                checkpointed = framework == "langgraph" and "SqliteSaver" in name
                if checkpointed and i < rounds - LANGGRAPH_ROUNDS[steps]:
                    continue
                trial = prepare(steps, tmp)
                gc.collect()
                before = fsync_ms(tmp, 10) if waits_for_fsync(name) else 0.0
                start, cpu = time.perf_counter(), time.process_time()
                trial.run()
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                written = trial.written()
                trial.close()
                if waits_for_fsync(name):
                    fsyncs.setdefault((name, steps), []).append((before, fsync_ms(tmp, 10)))
                sample = (wall / steps * 1e6, cpu / steps * 1e6, written / steps)
                samples[name].setdefault(steps, []).append(sample)
        print(f"  measured {steps} steps", flush=True)
    return samples


def median(samples: list[tuple[float, float, float]], i: int) -> float:
    return statistics.median(s[i] for s in samples)


def report(samples: dict, all_cases: dict[str, tuple[str, Prepare]]) -> list[str]:
    base = {"agentloops": "agentloops, no store", "langgraph": "LangGraph, no checkpointer"}
    head = " | ".join(f"{n} steps" for n in STEPS)
    lines = [
        f"| case | wall us/step ({head}) | added by durability, us/step ({head}) "
        f"| CPU us/step ({head}) | bytes written/step ({head}) | rounds |",
        "|---|---|---|---|---|---|",
    ]
    for name, (framework, _) in all_cases.items():
        by_n = samples[name]
        wall = [median(by_n[n], 0) for n in STEPS]
        added = [median(by_n[n], 0) - median(samples[base[framework]][n], 0) for n in STEPS]
        cpu = [median(by_n[n], 1) for n in STEPS]
        written = [median(by_n[n], 2) for n in STEPS]
        added_cell = " / ".join(f"{a:,.0f}" for a in added) if name != base[framework] else "—"
        written_cell = " / ".join(f"{b:,.0f}" for b in written) if any(written) else "—"
        rounds = " / ".join(str(len(by_n[n])) for n in STEPS)
        lines.append(
            f"| {name} | {' / '.join(f'{w:,.0f}' for w in wall)} | {added_cell} "
            f"| {' / '.join(f'{c:,.0f}' for c in cpu)} | {written_cell} | {rounds} |"
        )
    lines += ["", "Medians. Added by durability: wall us/step minus the same framework's without a"]
    lines += ["store (agentloops) or checkpointer (LangGraph), from the same run.", ""]
    lines += ["| check | measured | target | met |", "|---|---|---|---|"]
    for name in all_cases:
        if not name.startswith("agentloops, SQLiteStore"):
            continue
        for n in STEPS:
            added = median(samples[name][n], 0) - median(samples[base["agentloops"]][n], 0)
            met = "yes" if added < GOAL_MS * 1000 else "**no**"
            lines.append(
                f"| {name}, added at {n} steps | {added / 1000:,.2f} ms | < 1 ms | {met} |"
            )
    for name in all_cases:
        small, large = (median(samples[name][n], 2) for n in STEPS)
        if small:
            growth = large / small
            linear = "yes" if growth < 1.3 else "**no**"
            what = f"{name}: bytes/step at 1,000 / at 100"
            lines.append(f"| {what} | {growth:,.2f}x | about 1x (linear) | {linear} |")
    return lines


def waits_for_fsync(case: str) -> bool:
    """Whether the case's commits wait for the disk (agentloops' FULL SQLite and
    PostgreSQL; LangGraph's checkpoints are bound by their own CPU time)."""
    return "FULL" in case or "Postgres" in case


def by_round(
    samples: dict,
    all_cases: dict[str, tuple[str, Prepare]],
    fsyncs: dict[tuple[str, int], list[tuple[float, float]]],
) -> list[str]:
    """The cases that wait for fsync at each commit, sample by sample, beside the disk's
    fsync time measured just before and just after: what they add is mostly that."""
    lines = [
        "| case | steps | each sample: fsync ms before / after -> wall ms per step |",
        "|---|---|---|",
    ]
    for name in all_cases:
        if not waits_for_fsync(name):
            continue
        for n in STEPS:
            pairs = zip(fsyncs[(name, n)], samples[name][n], strict=True)
            cells = ", ".join(f"{b:.2f} / {a:.2f} -> {s[0] / 1000:.2f}" for (b, a), s in pairs)
            lines.append(f"| {name} | {n} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "durability.json")
    args = parser.parse_args()
    print(describe())
    if not missing("langgraph"):
        print(
            f"peer langgraph: {versions('langgraph')}, langgraph-checkpoint-sqlite "
            f"{_version('langgraph-checkpoint-sqlite')}"
        )
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        conninfo = stack.enter_context(postgres_or_none())
        all_cases = cases(conninfo)
        print(sqlite_settings(tmp))
        print(f"journal writes (transactions) per ReAct step: {writes_per_step(tmp):.2f}")
        fsyncs: dict[tuple[str, int], list[tuple[float, float]]] = {}
        samples = measure(all_cases, args.quick, tmp, fsyncs)
    print()
    print("\n".join(report(samples, all_cases)))
    print()
    print("\n".join(by_round(samples, all_cases, fsyncs)))
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(
        json.dumps({k: {str(n): s for n, s in v.items()} for k, v in samples.items()})
    )
    print(f"\nsamples written to {os.path.relpath(args.json)}")


def fsync_ms(directory: Path, n: int = 100) -> float:
    """Median time of one fsync of a 4 KiB append here: what synchronous=FULL waits for at
    each commit (and PostgreSQL at each of its own). It varies with the disk's other work."""
    path = directory / "fsync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        times = []
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times) * 1000


def writes_per_step(tmp: Path, steps: int = 50) -> float:
    """How many journal writes (one transaction each) a ReAct step makes, counted on a
    store whose `append_many` counts its calls (an untimed run)."""
    store = MemoryStore()
    calls = 0
    append_many = store.append_many

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        return append_many(*args, **kwargs)  # type: ignore[arg-type]

    store.append_many = counted  # type: ignore[method-assign]
    agentloops_trial(steps, store, nothing_written()).run()
    return calls / steps


def sqlite_settings(tmp: Path) -> str:
    """What the SQLite cases run with, read back from their connections."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    store = SQLiteStore(tmp / "settings.db")
    conn = store.connect()
    ours = names[conn.execute("PRAGMA synchronous").fetchone()[0]]
    conn.close()
    store.close()
    line = f"SQLiteStore by default: journal_mode=WAL, synchronous={ours}"
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return line
    conn = sqlite3.connect(tmp / "saver.db", check_same_thread=False)
    SqliteSaver(conn).setup()
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    theirs = names[conn.execute("PRAGMA synchronous").fetchone()[0]]
    conn.close()
    return f"{line}; SqliteSaver: journal_mode={mode}, synchronous={theirs}"


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    main()
