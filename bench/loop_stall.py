"""How long the event loop stalls while 2,000 runs call a blocking sync tool (issue 19).

2,000 concurrent ReAct `arun`s, each one call of a plain `def` tool that blocks its thread
for 5 ms, then an answer. A ticker task on the same loop sleeps 5 ms at a time and records
how late it wakes: the longest wait is the loop's worst stall, which every other coroutine
on that loop (a web server's requests, a lease renewal) shares; "stalled in all" adds up
how late it woke each time. A sampler thread records the threads alive at peak, and every
`Thread.start` during the batch is counted. Side by side in one run, each contender in a
fresh interpreter:

- plain asyncio loop: the same runs written by hand, the sync tool through
  `loop.run_in_executor` on a 32-thread pool: the floor for this workload;
- agentloops arun, sync tool: the `def` tool under `arun` (agentloops' own bounded pool);
- agentloops arun, async tool: the same tool as `async def`, for scale.

Two fake models: `suspend` sleeps 50 ms per call on the event loop (a real model is a network
call), `busy` answers at once without suspending (the worst case: nothing but the tool
gives the loop back). With `--tree NAME=PATH` the agentloops contenders run once per
source tree (e.g. before the bounded pool), each through its own `PYTHONPATH`.

    python bench/loop_stall.py                        # 2,000 runs, both models, 3 rounds, ~1 min
    python bench/loop_stall.py --quick                # 500 runs, 1 round, ~5 s
    python bench/loop_stall.py --tree before=/tmp/before-bug2 --tree main=.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TOOL_SECONDS = 0.005
TICK = 0.005
LATENCY = 0.05
PLAIN, ARUN_SYNC, ARUN_ASYNC = (
    "plain asyncio loop",
    "agentloops arun, sync tool",
    "agentloops arun, async tool",
)
CONTENDERS = (PLAIN, ARUN_SYNC, ARUN_ASYNC)


def blocking_add(a: int, b: int) -> str:
    """Add two integers (slowly: it blocks its thread)."""
    time.sleep(TOOL_SECONDS)
    return str(a + b)


async def async_add(a: int, b: int) -> str:
    """Add two integers (slowly: it sleeps on the event loop)."""
    await asyncio.sleep(TOOL_SECONDS)
    return str(a + b)


async def model_wait(suspend: bool) -> None:
    if suspend:
        await asyncio.sleep(LATENCY)


# -- the contenders: each returns the coroutine that performs the whole batch -----------


def plain(runs: int, suspend: bool) -> Callable[[], Awaitable[None]]:
    pool = ThreadPoolExecutor(32)

    async def one(i: int) -> str:
        transcript: list[Any] = [("user", "go")]
        await model_wait(suspend)
        transcript.append(("assistant", ("add", {"a": i, "b": 1})))
        result = await asyncio.get_running_loop().run_in_executor(pool, blocking_add, i, 1)
        transcript.append(("user", result))
        await model_wait(suspend)
        return "done"

    async def batch() -> None:
        answers = await asyncio.gather(*(one(i) for i in range(runs)))
        assert answers == ["done"] * runs

    return batch


class FakeModel:
    """One tool call, then the answer; each reply after `model_wait`."""

    def __init__(self, i: int, suspend: bool):
        from agentloops import Message, ModelResponse, ToolCall, Usage

        usage = Usage(input_tokens=10, output_tokens=5)
        call = ToolCall(f"call_{i}", "add", {"a": i, "b": 1})
        self._next = iter(
            [
                ModelResponse(Message("assistant", (call,)), "tool_use", usage),
                ModelResponse(Message.assistant("done"), "end_turn", usage),
            ]
        ).__next__
        self.suspend = suspend

    def complete(self, request: Any) -> Any:
        raise AssertionError("arun must await acomplete")

    async def acomplete(self, request: Any) -> Any:
        await model_wait(self.suspend)
        return self._next()


def agentloops(runs: int, suspend: bool, sync_tool: bool) -> Callable[[], Awaitable[None]]:
    from agentloops import ReActLoop, ToolRegistry, tool

    registry = ToolRegistry([tool(blocking_add if sync_tool else async_add, name="add")])
    loops = [ReActLoop(FakeModel(i, suspend), registry) for i in range(runs)]

    async def batch() -> None:
        results = await asyncio.gather(*(loop.arun("go") for loop in loops))
        for i, result in enumerate(results):
            assert result.answer == "done", result.detail
            assert result.messages[2].tool_results[0].content == str(i + 1)

    return batch


def prepare(name: str, runs: int, suspend: bool) -> Callable[[], Awaitable[None]]:
    if name == PLAIN:
        return plain(runs, suspend)
    return agentloops(runs, suspend, sync_tool=name == ARUN_SYNC)


# -- the child: one batch under the ticker and the thread sampler ------------------------


def child(name: str, runs: int, suspend: bool) -> dict[str, Any]:
    asyncio.run(prepare(name, 20, suspend)())  # warm-up: imports, first-call caches
    batch = prepare(name, runs, suspend)
    peak = [threading.active_count()]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.001):
            peak[0] = max(peak[0], threading.active_count())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started_threads = [0]
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        started_threads[0] += 1
        start(thread)

    threading.Thread.start = counted  # type: ignore[method-assign]

    async def measured() -> tuple[float, list[float]]:
        lags: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            while not done.is_set():
                asked = time.perf_counter()
                await asyncio.sleep(TICK)
                lags.append(time.perf_counter() - asked - TICK)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)  # the ticker is waiting before the batch starts
        started = time.perf_counter()
        await batch()
        wall = time.perf_counter() - started
        done.set()
        await ticker
        return wall, lags

    wall, lags = asyncio.run(measured())
    threading.Thread.start = start  # type: ignore[method-assign]
    sampling.set()
    sampler.join()
    lags.sort()
    return {
        "wall": wall,
        "max_stall": lags[-1],
        "stalled": sum(lags),
        "threads": peak[0] - 1,  # the sampler's own thread does not count
        "started": started_threads[0],
    }


# -- the parent: rounds, a table -----------------------------------------------------------


def run_child(name: str, runs: int, suspend: bool, tree: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree.resolve())
    cmd = [sys.executable, __file__, "--child", name, "--runs", str(runs)]
    cmd += ["--model", "suspend" if suspend else "busy"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE.parent)
    if done.returncode != 0:
        sys.exit(f"{name} failed:\n{done.stderr}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=("suspend", "busy", "both"), default="both")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--quick", action="store_true", help="500 runs, 1 round")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.runs, args.rounds = 500, 1
    if args.child:
        print(json.dumps(child(args.child, args.runs, args.model == "suspend")))
        return
    trees: list[tuple[str, Path | None]] = [
        (name, Path(path)) for name, _, path in (t.partition("=") for t in args.tree)
    ] or [("", None)]
    models = [True, False] if args.model == "both" else [args.model == "suspend"]
    rows: list[tuple[str, str, Path | None]] = []
    for suspend in models:
        rows.append(("suspend" if suspend else "busy", PLAIN, None))
        for tree_name, tree in trees:
            for name in (ARUN_SYNC, ARUN_ASYNC):
                label = f"{name} ({tree_name})" if tree_name else name
                rows.append(("suspend" if suspend else "busy", label, tree))
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {(m, n): [] for m, n, _ in rows}
    for r in range(args.rounds):
        for model, label, tree in rows[r % len(rows) :] + rows[: r % len(rows)]:
            name = label.split(" (")[0]
            samples[(model, label)].append(run_child(name, args.runs, model == "suspend", tree))
            print(f"  round {r + 1}: {model} {label}", file=sys.stderr)
    print(
        f"{args.runs} concurrent runs, one blocking {TOOL_SECONDS * 1000:g} ms sync tool call each"
    )
    print(
        f"(medians of {args.rounds} rounds; a stall is how late a {TICK * 1000:g} ms ticker woke)"
    )
    print()
    head = "model | contender | wall | longest stall | stalled in all | threads at peak"
    print(f"| {head} | threads started |")
    print("|---|---|---|---|---|---|---|")
    for model, label, _ in rows:
        got = samples[(model, label)]

        def med(key: str, got: list[dict[str, Any]] = got) -> float:
            return statistics.median(s[key] for s in got)

        print(
            f"| {model} | {label} | {med('wall'):.2f} s | {med('max_stall') * 1000:.0f} ms"
            f" | {med('stalled') * 1000:.0f} ms | {med('threads'):.0f} | {med('started'):.0f} |"
        )


if __name__ == "__main__":
    main()
