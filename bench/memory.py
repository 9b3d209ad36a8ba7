"""Memory over a long run: what a loop holds beyond the transcript itself.

1000 ReAct steps with realistic sizes: each model turn is a short thought plus one tool
call, built fresh by the fake model as a provider would; each tool result is a new 2 KB
string. The transcript's own size is the sum of the sizes of the string objects held in
its messages (`sys.getsizeof`). Peak growth is measured twice: tracemalloc in this process,
and peak RSS (VmHWM, reset before the run) in a fresh interpreter per loop.

    python bench/memory.py [--steps 1000]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterable

from machine import describe
from plain_loop import Call, Msg, Reply, Result, plain_loop

from agentloops import (
    Message,
    ModelRequest,
    ModelResponse,
    ReActLoop,
    Text,
    ToolCall,
    ToolResult,
    Usage,
    tool,
)

RESULT_BYTES = 2048
TARGET = 2.0


@tool
def fetch(i: int) -> str:
    """Fetch record i (2 KB of text)."""
    return (f"record {i:06d}: " + "lorem ipsum " * 200)[:RESULT_BYTES]


def thought(i: int) -> str:
    return f"Record {i - 1} is in; next I fetch record {i} to continue the survey."


class FreshModel:
    """Builds each reply when asked, so its objects count like a real provider's."""

    def __init__(self, steps: int):
        self.steps, self.i = steps, 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        i, self.i = self.i, self.i + 1
        if i == self.steps:
            return ModelResponse(Message.assistant("All records fetched."), "end_turn")
        blocks = (Text(thought(i)), ToolCall(f"call_{i:06d}", "fetch", {"i": i}))
        return ModelResponse(Message("assistant", blocks), "tool_use", Usage(2000, 40))


class FreshPlainModel:
    def __init__(self, steps: int):
        self.steps, self.i = steps, 0

    def complete(self, messages: list[Msg]) -> Reply:
        i, self.i = self.i, self.i + 1
        if i == self.steps:
            return Reply(Msg("assistant", ("All records fetched.",)), "end_turn")
        return Reply(Msg("assistant", (thought(i), Call(f"call_{i:06d}", "fetch", {"i": i}))), "")


def strings(blocks: Iterable[object]) -> Iterable[str]:
    for b in blocks:
        if isinstance(b, str):
            yield b
        elif isinstance(b, Text):
            yield b.text
        elif isinstance(b, (ToolCall, Call)):
            yield from (b.id, b.name, *b.args)
        elif isinstance(b, (ToolResult, Result)):
            yield from (b.call_id, b.content)


def run_agentloops(steps: int) -> list[object]:
    loop = ReActLoop(FreshModel(steps), [fetch], max_steps=steps + 1)
    return list(loop.run("Survey every record.").messages)


def run_plain(steps: int) -> list[object]:
    _, messages = plain_loop(FreshPlainModel(steps), {"fetch": fetch.fn}, "Survey.", steps + 1)
    return list(messages)


LOOPS: dict[str, Callable[[int], list[object]]] = {
    "plain loop": run_plain,
    "agentloops": run_agentloops,
}


def transcript_bytes(messages: list[object]) -> int:
    return sum(sys.getsizeof(s) for m in messages for s in strings(m.content))


def traced(name: str, steps: int) -> tuple[int, int]:
    """(tracemalloc peak growth, transcript bytes) for one run."""
    gc.collect()
    tracemalloc.start()
    messages = LOOPS[name](steps)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, transcript_bytes(messages)


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def rss_child(name: str, steps: int) -> None:
    """In a fresh interpreter: peak RSS growth over the run, printed as JSON."""
    LOOPS[name](3)  # warm: first-call imports and caches
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
    before = _status("VmRSS")
    messages = LOOPS[name](steps)
    print(
        json.dumps({"growth": _status("VmHWM") - before, "transcript": transcript_bytes(messages)})
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--child", choices=list(LOOPS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        rss_child(args.child, args.steps)
        return
    print(describe(), "\n")
    print(
        "| loop | transcript (KB) | tracemalloc peak growth (KB) | peak / transcript "
        "| peak RSS growth (KB) | RSS / transcript | per step (bytes, traced) |"
    )
    print("|---|---|---|---|---|---|---|")
    verdicts = []
    for name in LOOPS:
        peak, transcript = traced(name, args.steps)
        cmd = [sys.executable, __file__, "--child", name, "--steps", str(args.steps)]
        rss = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(
            f"| {name} | {transcript / 1024:,.0f} | {peak / 1024:,.0f} | {peak / transcript:.2f}x "
            f"| {rss['growth'] / 1024:,.0f} | {rss['growth'] / rss['transcript']:.2f}x "
            f"| {peak / args.steps:,.0f} |"
        )
        verdicts.append((name, peak / transcript))
    print(f"\n{args.steps} steps, a {RESULT_BYTES}-byte tool result per step.")
    print("\n| check | measured | target | met |\n|---|---|---|---|")
    for name, ratio in verdicts:
        if name == "agentloops":
            met = "yes" if ratio <= TARGET else "**no**"
            print(
                f"| agentloops peak memory growth / transcript size | {ratio:.2f}x "
                f"| <= {TARGET:.0f}x | {met} |"
            )


if __name__ == "__main__":
    main()
