"""Many runs on one event loop: 1,000 concurrent ReAct runs of 10 steps, 50 ms per model call.

Each run is nine tool calls then an answer, from replies prebuilt per run; the fake model
sleeps 50 ms per call and the tool is trivial, so the ideal wall time is 10 x 50 ms = 0.5 s
and anything above it is the loop's own cost (plus the machine's load). The contenders
(in bench/async_contenders.py):

- plain asyncio loop: about 15 lines, frozen dataclass messages, the floor;
- agentloops arun: `ReActLoop.arun`, 1,000 runs under one `asyncio.gather`;
- agentloops run on threads: the sync `ReActLoop.run` through `agentloops.batch.run_many`
  on a pool of one thread per run (each run holds its thread for its whole 0.5 s, so a
  pool of P threads needs runs / P x 0.5 s: fewer threads only make it slower);
- pydantic-ai Agent.run: `Agent.run` on its `FunctionModel` with an async function, an async tool;
- agentloops arun, def tool: `arun` with a plain `def` tool (on agentloops' bounded pool);
- agentloops arun, MemoryStore / SQLite FULL / SQLite NORMAL / PostgreSQL: `arun` journaled
  in one store for every run of the batch (PostgreSQL with --postgres URL, or when
  AGENTLOOPS_TEST_POSTGRES names a server; see .ci/with-postgres).

Every contender runs in a fresh interpreter (imports and a warm-up outside the timing):
wall and CPU time and peak RSS growth (VmHWM, reset just before) over the timed batch,
and, in the first round only, a second batch under tracemalloc for the peak of Python
allocations (tracemalloc does not see thread stacks; RSS does); the threads alive at peak
(sampled every 5 ms, the sampler left out) and the cyclic garbage collector's share of the
wall time (`gc.callbacks`). Rounds interleave the contenders, each round in a rotated
order; pydantic-ai, whose batch takes tens of seconds, runs in the first round only.
With --scale, a second table: plain asyncio and `arun` without a store at 3,000 and 10,000
concurrent runs.

    python bench/async_runs.py            # 1,000 runs, 3 rounds (pydantic-ai: 1), ~5 min
    python bench/async_runs.py --quick    # 200 runs, 2 rounds (pydantic-ai: 1), ~2 min
    python bench/async_runs.py --scale    # and the 3,000 / 10,000-run rows, ~3 min more
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from async_contenders import (
    LATENCY,
    STEPS,
    Batch,
    agentloops_tool,
    memory_store,
    postgres_store,
    prepare_arun,
    prepare_arun_def_tool,
    prepare_durable,
    prepare_plain,
    prepare_pydantic_ai,
    prepare_threads,
    sqlite_store,
)
from machine import describe
from peers import missing, versions

HERE = Path(__file__).resolve().parent
IDEAL = STEPS * LATENCY
POSTGRES_ENV = "AGENTLOOPS_BENCH_POSTGRES"
"""How the parent hands the PostgreSQL URL to its children."""


def _durable(make: Callable[[], object]) -> Callable[[], Callable[[int], Batch]]:
    return lambda: prepare_durable(make())


def _pg() -> Callable[[int], Batch]:
    return prepare_durable(postgres_store(os.environ[POSTGRES_ENV])())


CONTENDERS: dict[str, Callable[[], Callable[[int], Batch]]] = {
    "plain asyncio loop": lambda: prepare_plain,
    "agentloops arun": lambda: prepare_arun,
    "agentloops run on threads": lambda: prepare_threads,
    "pydantic-ai Agent.run": lambda: prepare_pydantic_ai,
    "agentloops arun, def tool": lambda: prepare_arun_def_tool,
    "agentloops arun, MemoryStore": _durable(memory_store),
    "agentloops arun, SQLite FULL": _durable(sqlite_store("FULL")),
    "agentloops arun, SQLite NORMAL": _durable(sqlite_store("NORMAL")),
    "agentloops arun, PostgreSQL": _pg,
}
PLAIN, ARUN, THREADS, PYDANTIC_AI, DEF_TOOL, MEMORY, SQLITE_FULL, SQLITE_NORMAL, POSTGRES = (
    CONTENDERS
)
DURABLE = (MEMORY, SQLITE_FULL, SQLITE_NORMAL, POSTGRES)
SCALE = (3000, 10000)


# -- the child: one contender in a fresh interpreter -------------------------------------


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


class Threads:
    """The most threads alive at once while it runs, itself left out (sampled every 5 ms)."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, threading.active_count() - 1)

    def __enter__(self) -> Threads:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class GCTime:
    """Seconds the cyclic garbage collector ran (every generation), from `gc.callbacks`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> GCTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def child(name: str, runs: int, trace: bool) -> dict[str, Any]:
    prepare = CONTENDERS[name]()
    prepare(min(runs, 20))()  # warm-up: first-call imports, caches, the default executor
    batch = prepare(runs)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    rss = _status("VmRSS")
    with Threads() as threads, GCTime() as gc_time:
        wall, cpu = time.perf_counter(), time.process_time()
        batch()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out: dict[str, Any] = {"wall": wall, "cpu": cpu, "rss": _status("VmHWM") - rss}
    out |= {"threads": threads.peak, "gc": gc_time.seconds}
    if trace:
        batch = prepare(runs)
        gc.collect()
        tracemalloc.start()
        batch()
        out["traced"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    else:
        out["traced"] = 0
    if name == ARUN:
        out["tool"] = agentloops_tool()[1]
    return out


# -- the parent: rounds, table, checks ---------------------------------------------------


def measure(
    names: list[str], runs: int, rounds: int, trace: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """Samples per contender; pydantic-ai (tens of seconds a batch) runs in round 1 only."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if name == PYDANTIC_AI and r > 0:
                continue
            cmd = [sys.executable, __file__, "--child", name, "--runs", str(runs)]
            if r == 0 and trace:
                cmd.append("--trace")
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
            if done.returncode != 0:
                sys.exit(f"{name} failed:\n{done.stderr}")
            samples[name].append(json.loads(done.stdout))
            wall = samples[name][-1]["wall"]
            print(f"  round {r + 1}: {name} {wall:.2f} s", file=sys.stderr)
    return samples


def summarise(samples: dict[str, list[dict[str, Any]]], runs: int) -> dict[str, dict[str, Any]]:
    plain = samples[PLAIN]
    out = {}
    for name, s in samples.items():
        walls = [x["wall"] for x in s]
        # pydantic-ai has one sample, from round 1: it pairs with the first plain sample.
        paired = [x["wall"] / p["wall"] for x, p in zip(s, plain[: len(s)], strict=True)]
        out[name] = {
            "wall_best": min(walls),
            "wall_median": statistics.median(walls),
            "vs_plain": statistics.median(paired),
            "vs_ideal": min(walls) / IDEAL,
            "cpu_us_per_step": min(x["cpu"] for x in s) / (runs * STEPS) * 1e6,
            "traced_per_run": s[0]["traced"] / runs,
            "rss_per_run": statistics.median(x["rss"] for x in s) / runs,
            "threads": max(x["threads"] for x in s),
            "gc_share": statistics.median(x["gc"] / x["wall"] for x in s),
            "n": len(s),
        }
    return out


def checks(summary: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    al = summary[ARUN]
    out = [
        (
            "agentloops arun wall / plain asyncio loop",
            f"{al['vs_plain']:.2f}x",
            "<= 1.5x",
            al["vs_plain"] <= 1.5,
        ),
        (
            f"agentloops arun wall / ideal ({IDEAL:.1f} s)",
            f"{al['vs_ideal']:.2f}x",
            "<= 1.5x",
            al["vs_ideal"] <= 1.5,
        ),
    ]
    bare = summary[ARUN]["wall_median"]
    goals = {MEMORY: 1.3, SQLITE_FULL: 3.0, POSTGRES: 2.0}
    for name, goal in goals.items():
        if name in summary:
            ratio = summary[name]["wall_median"] / bare
            what = f"{name} wall / agentloops arun (no store)"
            out.append((what, f"{ratio:.2f}x", f"<= {goal}x", ratio <= goal))
    for name in DURABLE:
        if name in summary:
            peak = summary[name]["threads"]
            out.append((f"{name}: threads at peak", f"{peak}", "<= 50", peak <= 50))
    if DEF_TOOL in summary:
        ratio = summary[DEF_TOOL]["wall_median"] / bare
        what = f"{DEF_TOOL} wall / agentloops arun (async def tool)"
        out.append((what, f"{ratio:.2f}x", "<= 1.5x", ratio <= 1.5))
    for other in (THREADS, PYDANTIC_AI):
        if other not in summary:
            continue
        for key, what in (("traced_per_run", "traced"), ("rss_per_run", "RSS")):
            ratio = summary[other][key] / max(al[key], 1)
            out.append(
                (
                    f"{other} / agentloops arun, memory per run ({what})",
                    f"{ratio:.1f}x",
                    ">= 2x",
                    ratio >= 2,
                )
            )
    return out


def report(summary: dict[str, dict[str, Any]], runs: int) -> list[str]:
    lines = [
        "| contender | wall, best / median (s) | / plain asyncio loop | / ideal "
        "| CPU per step (us) | memory per run, traced (bytes) | RSS growth per run (bytes) "
        "| threads at peak | GC share |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| ideal ({STEPS} x {LATENCY * 1000:.0f} ms) | {IDEAL:.2f} | — | 1.00x "
        "| — | — | — | — | — |",
    ]
    lines += rows(summary)
    lines += [
        "",
        f"{runs:,} concurrent runs of {STEPS} steps. / plain: median over rounds of the paired "
        "ratio; / ideal: best wall. CPU: best process time (all threads) / steps. Traced: "
        "tracemalloc peak over a batch / runs (first round). RSS: peak RSS growth over the "
        "timed batch / runs (median).",
        "",
        "| check | measured | target | met |",
        "|---|---|---|---|",
    ]
    for what, measured, target, met in checks(summary):
        lines.append(f"| {what} | {measured} | {target} | {'yes' if met else '**no**'} |")
    return lines


def rows(summary: dict[str, dict[str, Any]]) -> list[str]:
    return [
        f"| {name} | {s['wall_best']:.2f} / {s['wall_median']:.2f} (n={s['n']}) "
        f"| {s['vs_plain']:.2f}x | {s['vs_ideal']:.2f}x | {s['cpu_us_per_step']:,.0f} "
        f"| {s['traced_per_run']:,.0f} | {s['rss_per_run']:,.0f} | {s['threads']} "
        f"| {s['gc_share']:.0%} |"
        for name, s in summary.items()
    ]


def scale(rounds: int) -> tuple[list[str], dict[int, dict[str, dict[str, Any]]]]:
    """Plain asyncio and `arun` without a store at 3,000 and 10,000 runs (no tracemalloc)."""
    lines = [
        "| contender | runs | wall, best / median (s) | / plain asyncio loop | / ideal "
        "| CPU per step (us) | memory per run, traced (bytes) | RSS growth per run (bytes) "
        "| threads at peak | GC share |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    out = {}
    checks = []
    for runs in SCALE:
        summary = summarise(measure([PLAIN, ARUN], runs, rounds, trace=False), runs)
        out[runs] = summary
        lines += [row.replace(" | ", f" | {runs:,} | ", 1) for row in rows(summary)]
        ratio = summary[ARUN]["vs_plain"]
        checks.append(
            f"| agentloops arun / plain asyncio loop at {runs:,} runs | {ratio:.2f}x | <= 1.5x "
            f"| {'yes' if ratio <= 1.5 else '**no**'} |"
        )
    lines += ["", "| check | measured | target | met |", "|---|---|---|---|", *checks]
    return lines, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 runs, 2 rounds")
    parser.add_argument("--runs", type=int, help="concurrent runs (default 1000; quick: 200)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; quick: 2)")
    parser.add_argument("--no-peers", action="store_true", help="leave pydantic-ai out")
    parser.add_argument("--no-durable", action="store_true", help="leave the stores out")
    parser.add_argument(
        "--postgres", metavar="URL", help="a PostgreSQL server for the PostgresStore contender"
    )
    parser.add_argument("--scale", action="store_true", help="and 3,000 / 10,000 runs")
    parser.add_argument("--only", nargs="+", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "async_runs.json")
    parser.add_argument("--child", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    runs = args.runs or (200 if args.quick else 1000)
    rounds = args.rounds or (2 if args.quick else 3)
    if args.child:
        print(json.dumps(child(args.child, runs, args.trace)))
        return
    print(describe(), "\n")
    names = [PLAIN, ARUN, THREADS, DEF_TOOL]
    if not args.no_durable:
        names += [MEMORY, SQLITE_FULL, SQLITE_NORMAL]
        postgres = args.postgres or os.environ.get("AGENTLOOPS_TEST_POSTGRES")
        if postgres:
            os.environ[POSTGRES_ENV] = postgres
            names.append(POSTGRES)
        else:
            print("skip PostgreSQL: no --postgres URL, AGENTLOOPS_TEST_POSTGRES unset")
    why = "skipped (--no-peers)" if args.no_peers else missing("pydantic-ai")
    if why:
        print(f"skip pydantic-ai: {why}")
    else:
        names.append(PYDANTIC_AI)
        print(f"peer pydantic-ai: {versions('pydantic-ai')}")
    if args.only:
        names = [n for n in names if n in args.only or n == PLAIN]
    print(f"thread pool: {runs} threads (one per run)")
    samples = measure(names, runs, rounds)
    print(f"agentloops arun tool: {samples[ARUN][0]['tool']}\n")
    summary = summarise(samples, runs)
    print("\n".join(report(summary, runs)))
    scaled: dict[int, dict[str, dict[str, Any]]] = {}
    if args.scale:
        lines, scaled = scale(max(1, rounds - 1))
        print(f"\nWithout a store, at {' and '.join(f'{n:,}' for n in SCALE)} runs:\n")
        print("\n".join(lines))
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"runs": runs, "samples": samples, "summary": summary, "scale": scaled}, indent=1
        )
    )
    print(f"samples written to {os.path.relpath(args.json)}")


if __name__ == "__main__":
    main()
