"""ReAct loop overhead per step: agentloops against a plain loop and the peers, in one run.

The model answers instantly from prebuilt replies and the tool is trivial, so what is
timed is the loop itself. A run is N tool steps then one answer; per step = run time / N.
Loops, registries and replies are built outside the timing; contenders are interleaved
in every round so machine noise hits them alike, and the clock is the process's CPU time
so another process taking the core does not count. Peak memory per step comes from a
separate tracemalloc pass, so tracing does not distort the timings.

    python bench/react_overhead.py            # full run (about a minute with peers)
    python bench/react_overhead.py --quick    # fewer rounds, peers at 10 and 100 steps
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from chart import draw
from machine import describe
from peers import PEERS, missing, versions
from plain_loop import PlainModel, plain_loop, plain_script

from agentloops import Message, ModelRequest, ModelResponse, ReActLoop, ToolCall, Usage, tool

HERE = Path(__file__).resolve().parent
STEPS = (10, 100, 1000)
ROUNDS = {10: 25, 100: 15, 1000: 9}
PEER_ROUNDS = {10: 5, 100: 3, 1000: 1}
Runner = Callable[[], object]


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


class ZeroLatencyModel:
    """A `ModelClient` that hands back prebuilt replies: no validation, no copying."""

    def __init__(self, replies: list[ModelResponse]):
        self._next = iter(replies).__next__

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self._next()


def agentloops_script(steps: int) -> list[ModelResponse]:
    usage = Usage(input_tokens=10, output_tokens=5)
    replies = [
        ModelResponse(
            Message("assistant", (ToolCall(f"call_{i}", "add", {"a": i, "b": 1}),)),
            "tool_use",
            usage,
        )
        for i in range(steps)
    ]
    replies.append(ModelResponse(Message.assistant("done"), "end_turn", usage))
    return replies


def prepare_agentloops(steps: int) -> Runner:
    loop = ReActLoop(ZeroLatencyModel(agentloops_script(steps)), [add], max_steps=steps + 1)

    def run() -> object:
        result = loop.run("go")
        assert result.answer == "done" and result.tool_calls == steps, result.detail
        return result

    return run


def prepare_plain(steps: int) -> Runner:
    model, tools = PlainModel(plain_script(steps)), {"add": add.fn}

    def run() -> object:
        answer, _ = plain_loop(model, tools, "go", steps + 1)
        assert answer == "done"
        return answer

    return run


def timed(prepare: Callable[[int], Runner], steps: int, batch: int = 1) -> float:
    """Seconds per step over `batch` back-to-back runs (short runs are batched so a
    sample is not mostly timer and cold-cache noise)."""
    runs = [prepare(steps) for _ in range(batch)]
    gc.collect()
    start = time.process_time()
    for run in runs:
        run()
    return (time.process_time() - start) / (batch * steps)


def peak_bytes(prepare: Callable[[int], Runner], steps: int) -> int:
    run = prepare(steps)
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(contenders: dict[str, Callable[[int], Runner]], quick: bool) -> dict[str, dict]:
    """us/step samples and peak bytes/step, per contender and run length."""
    out: dict[str, dict] = {name: {"us": {}, "peak": {}} for name in contenders}
    for prepare in contenders.values():
        timed(prepare, 10)  # warm-up: first-call imports and caches
    for steps in STEPS:
        core = ROUNDS[steps] // (3 if quick else 1)
        peer_rounds = 0 if quick and steps == 1000 else PEER_ROUNDS[steps]
        for i in range(max(core, peer_rounds)):
            for name, prepare in contenders.items():
                if name in PEERS and i < peer_rounds:
                    sample = timed(prepare, steps)
                elif name not in PEERS and i < core:
                    sample = timed(prepare, steps, max(1, 500 // steps))
                else:
                    continue
                out[name]["us"].setdefault(steps, []).append(sample * 1e6)
        for name, prepare in contenders.items():
            if steps in out[name]["us"] and (name not in PEERS or steps == 100):
                out[name]["peak"][steps] = peak_bytes(prepare, steps) / steps
        print(f"  measured {steps} steps", file=sys.stderr)
    return out


def _cell(samples: list[float] | None) -> str:
    if not samples:
        return "—"
    return f"{min(samples):,.1f} / {statistics.median(samples):,.1f} (n={len(samples)})"


def _table(rows: dict[str, list[str]]) -> list[str]:
    lines = ["| loop | " + " | ".join(f"{n} steps" for n in STEPS) + " |"]
    lines.append("|---" * (len(STEPS) + 1) + "|")
    return lines + [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows.items()]


def checks(results: dict[str, dict]) -> list[tuple[str, float, str, bool]]:
    """(what, measured ratio, target, met) for every target this benchmark covers."""
    us = {name: r["us"] for name, r in results.items()}
    al, plain = us["agentloops"], us["plain loop"]
    out = []
    for n in STEPS:
        # Paired: each round ran both back to back, so a noisy moment hits both.
        ratio = statistics.median(a / p for a, p in zip(al[n], plain[n], strict=True))
        out.append((f"agentloops / plain loop at {n} steps", ratio, "<= 5x", ratio <= 5))
    for short in (10, 100):
        ratio = min(al[1000]) / min(al[short])
        out.append((f"agentloops per step at 1000 / at {short}", ratio, "<= 1.5x", ratio <= 1.5))
    for peer in PEERS:
        for n in us.get(peer, {}):
            ratio = min(us[peer][n]) / min(al[n])
            out.append((f"{peer} / agentloops at {n} steps", ratio, ">= 20x", ratio >= 20))
    return out


def report(results: dict[str, dict]) -> list[str]:
    lines = _table({name: [_cell(r["us"].get(n)) for n in STEPS] for name, r in results.items()})
    lines += ["", "us per step: best / median of n runs.", ""]
    lines += ["| check | measured | target | met |", "|---|---|---|---|"]
    for what, ratio, target, met in checks(results):
        lines.append(f"| {what} | {ratio:,.2f}x | {target} | {'yes' if met else '**no**'} |")
    lines += [
        "",
        "agentloops / plain: median over rounds of the paired ratio; the others: best runs.",
        "",
    ]
    peaks = {
        name: [f"{r['peak'][n]:,.0f}" if n in r["peak"] else "—" for n in STEPS]
        for name, r in results.items()
    }
    lines += _table(peaks)
    lines += ["", "tracemalloc peak bytes per step (a separate pass, not timed)."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds; peers skip 1000")
    parser.add_argument("--no-peers", action="store_true", help="agentloops and plain only")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "react_overhead.json")
    parser.add_argument("--chart", type=Path, default=HERE.parent / "docs/img/react_overhead.png")
    args = parser.parse_args()
    contenders: dict[str, Callable[[int], Runner]] = {
        "plain loop": prepare_plain,
        "agentloops": prepare_agentloops,
    }
    print(describe(), "\n")
    for peer, prepare in PEERS.items():
        why = "skipped (--no-peers)" if args.no_peers else missing(peer)
        if why:
            print(f"skip {peer}: {why}")
        else:
            contenders[peer] = prepare
            print(f"peer {peer}: {versions(peer)}")
    results = measure(contenders, args.quick)
    print("\n".join(report(results)))
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))
    print(f"\nsamples written to {os.path.relpath(args.json)}")
    print(draw(results, args.chart))


if __name__ == "__main__":
    main()
