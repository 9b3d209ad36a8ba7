"""Resuming a long journal: a 10,000-step ReAct run that failed at its end, resumed.

The run makes 10,000 tool calls (a trivial tool), one per model turn, journaled in a
SQLite file (synchronous=NORMAL, to build it quickly); its model then fails, so the run
stops with status "failed". Resuming it replays the 10,000 turns from the journal (no
model or tool call is made again) and asks a new model for the answer. Measured in a fresh
interpreter per sample: the resume's wall time, and in a second resume of a copy of the
file the peak of Python allocations (tracemalloc) while it runs.

    python bench/resume.py              # 10,000 steps, 3 samples (the build: minutes)
    python bench/resume.py --steps 2000 # quicker
    python bench/resume.py --keep DIR   # build into DIR once, and reuse it (before / after)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from machine import describe

HERE = Path(__file__).resolve().parent


def build(path: Path, steps: int) -> None:
    from agentloops import ReActLoop, SQLiteStore, tool
    from agentloops.testing import ScriptedModel, ScriptExhausted, use_tools

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    model = ScriptedModel([use_tools(("add", {"a": i, "b": 1})) for i in range(steps)])
    with SQLiteStore(path, synchronous="NORMAL") as store:  # closed: the WAL checkpointed
        loop = ReActLoop(model, [add], store=store, max_steps=steps + 2)
        try:
            loop.run("go", run_id="long")
        except ScriptExhausted:
            pass  # the script ran out: the run failed after its last tool call
        else:
            raise AssertionError("the run should have failed at its end")


def resume(path: Path, steps: int, trace: bool) -> dict[str, Any]:
    from agentloops import ReActLoop, SQLiteStore, tool
    from agentloops.testing import ScriptedModel

    @tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        raise AssertionError("a replayed call is not made again")

    store = SQLiteStore(path, synchronous="NORMAL")
    records = store.run_info("long").last_seq
    loop = ReActLoop(ScriptedModel(["done"]), [add], store=store, max_steps=steps + 2)
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    result = loop.resume("long")
    wall = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] if trace else 0
    tracemalloc.stop()
    assert result.answer == "done", result.detail
    return {"wall": wall, "peak": peak, "records": records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the journal here once, and keep it")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(resume(args.child, args.steps, args.trace)))
        return
    print(describe())
    where = args.keep or Path(tempfile.mkdtemp(prefix="agentloops-resume-"))
    where.mkdir(parents=True, exist_ok=True)
    if not (where / "built.db").exists():
        started = time.perf_counter()
        build(where / "built.db", args.steps)
        print(f"built a {args.steps:,}-step journal in {time.perf_counter() - started:.1f} s")
    samples = []
    for i in range(args.samples):
        for trace in (False, True):
            copy = where / f"run{i}{'t' if trace else ''}.db"
            shutil.copy(where / "built.db", copy)
            cmd = [sys.executable, __file__, "--child", str(copy), "--steps", str(args.steps)]
            cmd += ["--trace"] if trace else []
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
            if done.returncode != 0:
                sys.exit(done.stderr)
            samples.append((trace, json.loads(done.stdout)))
    walls = [s["wall"] for trace, s in samples if not trace]
    peaks = [s["peak"] for trace, s in samples if trace]
    records = samples[0][1]["records"]
    print("\n| journal | resume wall, best / median (s) | peak traced memory (MB) | per record |")
    print("|---|---|---|---|")
    print(
        f"| {args.steps:,} steps, {records:,} records | {min(walls):.2f} / "
        f"{statistics.median(walls):.2f} | {statistics.median(peaks) / 1e6:.1f} "
        f"| {statistics.median(peaks) / records:,.0f} bytes |"
    )
    for copy in where.glob("run*.db*"):
        copy.unlink()
    if args.keep is None:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
