"""What a `RateLimiter` costs per call when its limits are not reached: the same zero-latency
model called bare and through limiters, side by side, in one run.

The model hands back one prebuilt reply. Each round times a batch of calls of every case
back to back (CPU time, so a busy machine's other work counts less); the figure is the
median over the rounds, in microseconds per call, and its ratio to the bare call:

- the bare model's `complete` (the baseline) and `acomplete` (awaited in a loop);
- through a limiter with no limits set (the wrapper and its lock alone);
- with requests and tokens per minute and calls in flight all set, far above what the
  run reaches (the window's bookkeeping too), sync and async;
- the same, with 100 tasks calling at once on one event loop (`asyncio.gather`).

    python bench/limiter.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from machine import describe

from agentloops import Message, ModelRequest, ModelResponse, RateLimiter, Text, Usage

REQUEST = ModelRequest("", [Message.user("q")])
REPLY = ModelResponse(Message("assistant", (Text("ok"),)), "end_turn", Usage(10, 5))
CALLS = 2_000


class Instant:
    """A model that answers at once with a prebuilt reply."""

    model = "instant"

    def complete(self, request: ModelRequest) -> ModelResponse:
        return REPLY

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        return REPLY


def limited(**limits: int) -> RateLimiter:
    return RateLimiter(Instant(), **limits)


ALL = {"requests_per_minute": 10**9, "tokens_per_minute": 10**12, "max_concurrent": 1_000}


def sync_case(client: object) -> Callable[[], None]:
    complete = client.complete  # type: ignore[attr-defined]

    def run() -> None:
        for _ in range(CALLS):
            complete(REQUEST)

    return run


def async_case(client: object, *, tasks: int = 1) -> Callable[[], None]:
    acomplete = client.acomplete  # type: ignore[attr-defined]

    async def one(n: int) -> None:
        for _ in range(n):
            await acomplete(REQUEST)

    async def main() -> None:
        await asyncio.gather(*(one(CALLS // tasks) for _ in range(tasks)))

    return lambda: asyncio.run(main())


def timed(case: Callable[[], None]) -> float:
    start = time.process_time()
    case()
    return (time.process_time() - start) / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 25")
    rounds = 5 if parser.parse_args().quick else 25
    cases = {
        "bare complete": sync_case(Instant()),
        "limiter, no limits, complete": sync_case(limited()),
        "limiter, all limits, complete": sync_case(limited(**ALL)),
        "bare acomplete": async_case(Instant()),
        "limiter, all limits, acomplete": async_case(limited(**ALL)),
        "bare acomplete, 100 tasks": async_case(Instant(), tasks=100),
        "limiter, all limits, acomplete, 100 tasks": async_case(limited(**ALL), tasks=100),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, case in cases.items():
            samples[name].append(timed(case))
    print(f"{describe()}; {rounds} rounds of {CALLS} calls per case\n")
    print("| case | us per call, best / median | overhead over bare, median |")
    print("|---|---|---|")
    for name, times in samples.items():
        base = "bare acomplete" if "acomplete" in name else "bare complete"
        if "100 tasks" in name:
            base = "bare acomplete, 100 tasks"
        median = statistics.median(times)
        extra = median - statistics.median(samples[base])
        shown = "-" if name == base else f"+{extra:.2f} us"
        print(f"| {name} | {min(times):.2f} / {median:.2f} | {shown} |")


if __name__ == "__main__":
    main()
