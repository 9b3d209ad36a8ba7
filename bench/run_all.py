"""Run every benchmark in bench/, one after the other, and keep each one's report.

`make bench` runs this after installing the `bench` extra. Each script's Markdown output
goes to bench/results/<script>.md; the run fails if a script fails or the whole takes
longer than the budget (12 minutes on 2 cores; async_runs.py alone takes about 3, most of
it pydantic-ai's 10,000 steps, timed and then traced; durability.py about 2.5, most of it
LangGraph checkpointing 1,000-step runs; mcp_overhead.py about 1.5; journal_checks.py
about 0.5).

    python bench/run_all.py [--quick]
    .ci/with-postgres python bench/run_all.py    # with the PostgreSQL cases
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from machine import describe

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "react_overhead.py",
    "rewoo_worker.py",
    "startup.py",
    "memory.py",
    "async_runs.py",
    "loop_stall.py",
    "gc_runs.py",
    "stream_overhead.py",
    "subagent_overhead.py",
    "limiter.py",
    "durability.py",
    "journal_checks.py",
    "mcp_overhead.py",
    "follow.py",
)
QUICK = {
    "react_overhead.py",
    "async_runs.py",
    "loop_stall.py",
    "stream_overhead.py",
    "subagent_overhead.py",
    "limiter.py",
    "durability.py",
    "mcp_overhead.py",
    "follow.py",
}
"""The scripts that take `--quick`."""
BUDGET_SECONDS = 720


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="--quick for the scripts that have it")
    args = parser.parse_args()
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    print(describe())
    started, failed = time.perf_counter(), []
    for script in SCRIPTS:
        path = HERE / script
        command = [sys.executable, str(path)]
        if args.quick and script in QUICK:
            command.append("--quick")
        print(f"\n== {' '.join(['python', f'bench/{script}', *command[2:]])}", flush=True)
        start = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, cwd=HERE.parent)
        seconds = time.perf_counter() - start
        print(done.stdout, end="")
        (results / f"{path.stem}.md").write_text(done.stdout)
        if done.returncode != 0:
            failed.append(script)
        print(f"({script}: {seconds:.0f} s, exit {done.returncode})")
    total = time.perf_counter() - started
    print(f"\nall benchmarks: {total:.0f} s (budget {BUDGET_SECONDS} s)")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    if total > BUDGET_SECONDS:
        print(f"over the {BUDGET_SECONDS} s budget", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
