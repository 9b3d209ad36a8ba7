"""What keeping a Plan-and-Execute run costs: per run of three steps (one tool call each,
8 model calls, a zero-latency scripted model), without a store (the loop's own
`MemoryStore`), with `MemoryStore`, and with `SQLiteCheckpointer(path)` as older code
writes it (now `SQLiteStore`, `synchronous="FULL"`) and with `synchronous="NORMAL"`.

With `--before DIR` (a source tree of an earlier agentloops, e.g. `git archive` of a commit
unpacked there), the cases that tree can run (no store; `SQLiteCheckpointer(path)`) are
measured on it too, interleaved round by round with this tree's, so the two sides share
the machine's load. Each sample is a fresh process timing `--runs` runs after a warm-up;
medians of the per-run CPU time (this process, threads included) and wall time.

    .venv/bin/python bench/plan_execute_store.py [--rounds 5] [--runs 200] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe

CASES = {
    "no store": "none",
    "MemoryStore": "memory",
    "SQLiteCheckpointer(path)": "checkpointer",
    'SQLiteStore(path, synchronous="NORMAL")': "normal",
}
BEFORE = {"none", "checkpointer"}
"""What a tree from before the checkpointer became the run store can run."""


def child(case: str, runs: int) -> None:
    from agentloops import PlanAndExecute, SQLiteCheckpointer, tool
    from agentloops.testing import ScriptedModel, respond_structured, use_tools

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    steps = [{"step_number": n, "description": f"add {n} and {n}"} for n in (1, 2, 3)]
    plan = respond_structured({"steps": steps})
    script = [plan]
    for n in (1, 2, 3):
        script += [use_tools(("add", {"a": n, "b": n})), str(2 * n)]
    script.append("2, 4 and 6")
    folder = Path(tempfile.mkdtemp())
    options: dict[str, Any] = {}
    if case == "memory":
        from agentloops import MemoryStore

        options["store"] = MemoryStore()
    elif case == "checkpointer":
        options["checkpointer"] = SQLiteCheckpointer(folder / "runs.db")
    elif case == "normal":
        from agentloops import SQLiteStore

        options["store"] = SQLiteStore(folder / "runs.db", synchronous="NORMAL")
    cpu, wall = [], []
    for i in range(runs + 20):  # the first 20 warm up
        agent = PlanAndExecute(ScriptedModel(list(script)), [add], **options)
        c, w = time.process_time(), time.perf_counter()
        result = agent.run("Add 1+1, 2+2 and 3+3.", run_id=f"r{i}")
        c, w = time.process_time() - c, time.perf_counter() - w
        assert result.answer == "2, 4 and 6" and result.tool_calls == 3, result
        if i >= 20:
            cpu.append(c)
            wall.append(w)
    print(json.dumps({"cpu": statistics.median(cpu), "wall": statistics.median(wall)}))


def sample(tree: str | None, case: str, runs: int) -> dict[str, float]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, "--runs", str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--before", help="the source tree of an earlier agentloops")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.runs)
    sides = [("this tree", None, set(CASES.values()))]
    if args.before:
        sides.insert(0, ("before", str(Path(args.before).resolve()), BEFORE))
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for name, tree, cases in sides:
            for label, case in CASES.items():
                if case in cases:
                    got.setdefault((name, label), []).append(sample(tree, case, args.runs))
    print(describe())
    print(f"\n{args.rounds} rounds of {args.runs} runs; per run, median of the rounds' medians\n")
    print("| tree | case | CPU (us) | wall (us) |\n|---|---|---|---|")
    for (name, label), samples in got.items():
        cpu = statistics.median(s["cpu"] for s in samples) * 1e6
        wall = statistics.median(s["wall"] for s in samples) * 1e6
        print(f"| {name} | {label} | {cpu:,.0f} | {wall:,.0f} |")


if __name__ == "__main__":
    main()
