"""What the cyclic garbage collector costs 3,000 concurrent runs, and why (issue 26).

For each contender (the plain asyncio loop and `ReActLoop.arun` of bench/async_runs.py,
once per source tree given with `--tree NAME=PATH`), in a fresh interpreter:

- **objects per run in flight**: the GC-tracked objects that 200 runs hold midway (all
  waiting on their model call), over 200: what every collection of the old generations
  goes over, for every run in flight;
- **3,000 runs**: the batch's wall time, and the collector's collections, time and
  objects collected per generation (`gc.callbacks`).

    python bench/gc_runs.py
    python bench/gc_runs.py --tree before=/tmp/gc-before --tree main=.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PLAIN, ARUN = "plain asyncio loop", "agentloops arun"


def in_flight(name: str, runs: int = 200) -> tuple[float, dict[str, float]]:
    """Tracked objects per run while `runs` runs wait on their first model calls."""
    from async_contenders import (
        AsyncFakeModel,
        PlainAsyncModel,
        agentloops_script,
        agentloops_tool,
        plain_async_loop,
    )
    from async_contenders import add as add_tool
    from plain_loop import Call, Msg, Reply

    registry = None if name == PLAIN else agentloops_tool()[0]  # probed before the loop runs

    async def main() -> tuple[float, dict[str, float]]:
        if name == PLAIN:
            script = [
                Reply(Msg("assistant", (Call(f"c{i}", "add", {"a": i, "b": 1}),)), "tool_use")
                for i in range(9)
            ]
            models = [
                PlainAsyncModel([*script, Reply(Msg("assistant", ("done",)), "end_turn")])
                for _ in range(runs)
            ]
            starts = [lambda m=m: plain_async_loop(m, {"add": add_tool}, "go") for m in models]
        else:
            from agentloops import ReActLoop

            loops = [
                ReActLoop(AsyncFakeModel(agentloops_script()), registry, max_steps=11)
                for _ in range(runs)
            ]
            starts = [lambda loop_=loop_: loop_.arun("go") for loop_ in loops]
        gc.collect()
        before = Counter(type(o).__name__ for o in gc.get_objects())
        tasks = [asyncio.ensure_future(start()) for start in starts]
        await asyncio.sleep(0.12)  # midway: every run waits on a model call
        gc.collect()
        grown = Counter(type(o).__name__ for o in gc.get_objects()) - before
        await asyncio.gather(*tasks)
        return sum(grown.values()) / runs, {k: v / runs for k, v in grown.most_common(8)}

    return asyncio.run(main())


def batch(name: str, runs: int) -> dict[str, Any]:
    from async_contenders import prepare_arun, prepare_plain

    prepare = prepare_plain if name == PLAIN else prepare_arun
    prepare(20)()
    run_all = prepare(runs)
    by: dict[int, list[float]] = {}
    started = [0.0]

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        g = by.setdefault(info["generation"], [0, 0.0, 0])
        g[0] += 1
        g[1] += time.perf_counter() - started[0]
        g[2] += info["collected"]

    gc.collect()
    gc.callbacks.append(seen)
    wall = time.perf_counter()
    run_all()
    wall = time.perf_counter() - wall
    gc.callbacks.remove(seen)
    return {"wall": wall, "gens": {str(k): v for k, v in sorted(by.items())}}


def child(name: str, runs: int) -> dict[str, Any]:
    per_run, kinds = in_flight(name)
    return {"per_run": per_run, "kinds": kinds, **batch(name, runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.runs)))
        return
    rows: list[tuple[str, str, str | None]] = [(PLAIN, PLAIN, None)]
    trees = [t.partition("=") for t in args.tree] or [("", "", "")]
    for tree, _, path in trees:
        rows.append((f"{ARUN} ({tree})" if tree else ARUN, ARUN, path or None))
    print(f"{args.runs} concurrent 10-step runs, a fake model sleeping 50 ms per call\n")
    head = "| contender | objects per run in flight | wall | gen 0 | gen 1 | gen 2 | GC time |"
    print(f"{head} collected |")
    print("|---|---|---|---|---|---|---|---|")
    for label, name, path in rows:
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = str(Path(path).resolve())
        cmd = [sys.executable, __file__, "--child", name, "--runs", str(args.runs)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE)
        if done.returncode != 0:
            sys.exit(f"{label} failed:\n{done.stderr}")
        got = json.loads(done.stdout)
        gens = got["gens"]
        count = [gens.get(str(g), [0, 0.0, 0]) for g in range(3)]
        spent = sum(c[1] for c in count)
        print(
            f"| {label} | {got['per_run']:.0f} | {got['wall']:.2f} s | "
            + " | ".join(f"{c[0]} ({c[1]:.2f} s)" for c in count)
            + f" | {spent:.2f} s ({spent / got['wall']:.0%}) | {sum(c[2] for c in count)} |"
        )
        print(
            f"  {label}: {', '.join(f'{k} {v:.1f}' for k, v in got['kinds'].items())}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
