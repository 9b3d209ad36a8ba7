"""Streaming adds no per-step cost when nobody streams: `run()` over a model that can stream
against one that cannot, side by side, and what `stream()` itself costs, in one run.

The setting of bench/react_overhead.py: a zero-latency model hands back prebuilt replies
(a trivial tool N times, then an answer) and the clock is the process's CPU time. The
streaming model is the same model plus a `stream` method that yields prebuilt deltas (a
`ToolCallDelta` with the id and name, then the arguments' JSON in 8-character pieces,
as `agentloops.testing.deltas` cuts them) and then the reply. Four ways to run, each
round all of them back to back:

- `run()`, model without `stream` (the baseline);
- `run()`, model with `stream`: nobody streams, so `stream` is never called;
- `stream()`, model without `stream`: every event of the run, no deltas;
- `stream()`, model with `stream`: every event and every delta.

    python bench/stream_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

from machine import describe
from plain_loop import PlainModel, plain_loop, plain_script
from react_overhead import Runner, ZeroLatencyModel, add, agentloops_script, timed

from agentloops import ModelRequest, ModelResponse, ReActLoop
from agentloops.events import Delta
from agentloops.testing import deltas

HERE = Path(__file__).resolve().parent
STEPS = 100
BATCH = 5
TARGET = 1.05


class StreamingZeroLatencyModel(ZeroLatencyModel):
    """`ZeroLatencyModel` (the same `complete`) plus `stream`, whose deltas are cut from
    each reply before the timing."""

    def __init__(self, replies: list[ModelResponse]):
        super().__init__(replies)
        self._parts = {id(r): [*deltas(r), r] for r in replies}

    def stream(self, request: ModelRequest) -> Iterator[Delta | ModelResponse]:
        yield from self._parts[id(self.complete(request))]


def prepare(model_class: type[ZeroLatencyModel], streaming: bool) -> Callable[[int], Runner]:
    def prepare_steps(steps: int) -> Runner:
        loop = ReActLoop(model_class(agentloops_script(steps)), [add], max_steps=steps + 1)

        def run() -> object:
            if streaming:
                *events, result = loop.stream("go")
                assert events, "stream() yielded no events"
            else:
                result = loop.run("go")
            assert result.answer == "done" and result.tool_calls == steps, result.detail
            return result

        return run

    return prepare_steps


def prepare_plain(steps: int) -> Runner:
    model, tools = PlainModel(plain_script(steps)), {"add": add.fn}
    return lambda: plain_loop(model, tools, "go", steps + 1)


BASELINE = "run(), model without stream"
QUIET = "run(), model with stream"
CONTENDERS: dict[str, Callable[[int], Runner]] = {
    "plain loop": prepare_plain,
    BASELINE: prepare(ZeroLatencyModel, streaming=False),
    QUIET: prepare(StreamingZeroLatencyModel, streaming=False),
    "stream(), model without stream": prepare(ZeroLatencyModel, streaming=True),
    "stream(), model with stream": prepare(StreamingZeroLatencyModel, streaming=True),
}


def count_deltas() -> int:
    """Deltas per run of STEPS steps, as the streaming model sends them."""
    model = StreamingZeroLatencyModel(agentloops_script(STEPS))
    loop = ReActLoop(model, [add], max_steps=STEPS + 1)
    return sum(1 for e in loop.stream("go") if isinstance(e, Delta))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 25")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "stream_overhead.json")
    args = parser.parse_args()
    rounds = 5 if args.quick else 25
    print(describe(), "\n")
    for prepare_steps in CONTENDERS.values():
        timed(prepare_steps, 10)  # warm-up
    us: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for r in range(rounds):
        names = list(CONTENDERS)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            us[name].append(timed(CONTENDERS[name], STEPS, BATCH) * 1e6)
    print("| how | us per step, best / median | / run(), model without stream |")
    print("|---|---|---|")
    ratios = {}
    for name, samples in us.items():
        ratios[name] = statistics.median(a / b for a, b in zip(samples, us[BASELINE], strict=True))
        print(
            f"| {name} | {min(samples):,.2f} / {statistics.median(samples):,.2f} "
            f"| {ratios[name]:.2f}x |"
        )
    print(
        f"\n{rounds} rounds of {BATCH} runs of {STEPS} steps, CPU time; ratios: median over "
        f"rounds of the paired ratio. The streaming model sends {count_deltas() / STEPS:.1f} "
        "deltas per step."
    )
    met = "yes" if ratios[QUIET] <= TARGET else "**no**"
    print("\n| check | measured | target | met |\n|---|---|---|---|")
    print(f"| {QUIET} / {BASELINE} | {ratios[QUIET]:.2f}x | <= {TARGET:.2f}x | {met} |")
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps({"us_per_step": us, "ratios": ratios}, indent=1))
    print(f"samples written to {os.path.relpath(args.json)}")


if __name__ == "__main__":
    main()
