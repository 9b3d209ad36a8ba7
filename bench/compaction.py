"""Compaction's own cost per ReAct step, at 100 and 1,000 steps, side by side with the same
run without it: it must not grow with the transcript (no walk of the whole transcript per
step).

The model answers instantly (a tool call per step, a one-line summary for a "compactor"
call) and the tool returns 400 characters, so what is timed is the loop and the
middleware. Contenders, interleaved in every round, CPU time:

- `plain`: no compaction;
- `seam`: a middleware that passes every call through (what any middleware costs);
- `counting`: `Compaction` with a window so large it never compacts (the per-step count);
- `compacting`: a 4,000-token window, so it compacts every few dozen steps (elides,
  summarises, and the summary calls are in the time too).

    python bench/compaction.py            # full run
    python bench/compaction.py --quick    # fewer rounds
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from agentloops import (
    Compaction,
    Message,
    Middleware,
    MiddlewareContext,
    ModelRequest,
    ModelResponse,
    ReActLoop,
    ToolCall,
    tool,
)
from agentloops.usage import Usage

STEPS = (100, 1000, 3000)
ROUNDS = {100: 15, 1000: 7, 3000: 3}
OUTPUT = "x" * 400


@tool
def fetch(i: int) -> str:
    """Fetch page i."""
    return OUTPUT


class InstantModel:
    """A tool call per step, then an answer; a summary for a compactor's call."""

    def __init__(self, steps: int):
        self.steps = steps
        self.calls = 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=5)
        if request.role == "compactor":
            return ModelResponse(Message.assistant("fetched pages so far"), "end_turn", usage)
        self.calls += 1
        if self.calls > self.steps:
            return ModelResponse(Message.assistant("done"), "end_turn", usage)
        call = ToolCall(f"call_{self.calls}", "fetch", {"i": self.calls})
        return ModelResponse(Message("assistant", (call,)), "tool_use", usage)


class PassThrough(Middleware):
    """Model hooks that change nothing: the seam's own cost, as Compaction's hooks pay it."""

    def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> ModelRequest:
        return request

    def after_model(
        self, request: ModelRequest, response: ModelResponse, ctx: MiddlewareContext
    ) -> ModelResponse:
        return response


def prepare(steps: int, middleware: Middleware | None) -> Callable[[], object]:
    def run() -> object:
        loop = ReActLoop(
            InstantModel(steps),
            [fetch],
            max_steps=steps + 1,
            middleware=[middleware] if middleware is not None else (),
        )
        result = loop.run("fetch every page")
        assert result.answer == "done", result.detail
        return result

    return run


def contenders() -> dict[str, Middleware | None]:
    return {
        "plain": None,
        "seam": PassThrough(),
        "counting": Compaction(10_000_000),
        "compacting": Compaction(4000, keep_last=4),
    }


def timed(run: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    run()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = []
    for steps in STEPS:
        rounds = 3 if args.quick else ROUNDS[steps]
        runs = {name: prepare(steps, c) for name, c in contenders().items()}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(timed(run))
        per_step = {name: statistics.median(t) / steps * 1e6 for name, t in times.items()}
        rows.append((steps, per_step))
    print(
        "| steps | plain | seam | counting | compacting | counting / plain "
        "| compacting / plain | compaction's own (counting − seam, compacting − seam) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for steps, p in rows:
        plain, seam = p["plain"], p["seam"]
        counting, compacting = p["counting"], p["compacting"]
        print(
            f"| {steps} | {plain:.1f} | {seam:.1f} | {counting:.1f} | {compacting:.1f} | "
            f"{counting / plain:.2f} | {compacting / plain:.2f} | "
            f"{counting - seam:.1f}, {compacting - seam:.1f} |"
        )
    print("\n(µs of CPU per ReAct step, median of the rounds)")


if __name__ == "__main__":
    main()
