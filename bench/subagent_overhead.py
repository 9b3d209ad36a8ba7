"""What a sub-agent tool costs per call: `loop.as_tool(...)` against calling the loop directly,
side by side, in one run.

The sub-agent is a ReAct loop of one tool step and an answer (two model calls) over a
zero-latency model with prebuilt replies (bench/react_overhead.py's setting: the clock is
the process's CPU time, the loops and replies are built outside the timing, contenders
interleave in every round). A parent ReAct loop calls it N times, one call per turn, then
answers. Per call:

- `sub.run()` directly: the sub-run alone, no parent (for scale);
- a hand-written tool that calls `sub.run()`: the parent's turn plus the sub-run, with
  nothing rolled up (the way the issue says users wrap loops today);
- `sub.as_tool(...)`: the same parent and sub-run, the sub-run hosted by the parent's
  driver (opened, stamped, metered when priced, counted in the tree, rolled up).

The agent tool's overhead per call is the last minus the second: what hosting a sub-run
costs over a plain call of the loop. Each case runs plain, with an event sink, and with a
`MemoryStore` (the sub-run journaled as a run of its own, under a lease with its keeper).

    python bench/subagent_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

from machine import describe
from react_overhead import Runner, ZeroLatencyModel, add, timed

from agentloops import MemoryStore, Message, ModelResponse, ReActLoop, ToolCall, Usage, tool

HERE = Path(__file__).resolve().parent
CALLS = 20
BATCH = 5
USAGE = Usage(input_tokens=10, output_tokens=5)


def sub_replies(runs: int) -> list[ModelResponse]:
    one = [
        ModelResponse(
            Message("assistant", (ToolCall("inner", "add", {"a": 2, "b": 3}),)), "tool_use", USAGE
        ),
        ModelResponse(Message.assistant("5"), "end_turn", USAGE),
    ]
    return one * runs


def parent_replies(calls: int, name: str) -> list[ModelResponse]:
    turns = [
        ModelResponse(
            Message("assistant", (ToolCall(f"call_{i}", name, {"task": "Add 2 and 3."}),)),
            "tool_use",
            USAGE,
        )
        for i in range(calls)
    ]
    return [*turns, ModelResponse(Message.assistant("done"), "end_turn", USAGE)]


def prepare(how: str, setting: str) -> Callable[[int], Runner]:
    def prepare_calls(calls: int) -> Runner:
        events: list[object] = []
        sink = events.append if setting == "sink" else None
        store = MemoryStore() if setting == "store" else None
        sub = ReActLoop(ZeroLatencyModel(sub_replies(calls)), [add], on_event=sink)
        if how == "direct":
            return lambda: [sub.run("Add 2 and 3.") for _ in range(calls)]

        if how == "wrapped":

            @tool
            def sub_tool(task: str) -> str:
                """Adds numbers."""
                return sub.run(task).answer

            tools = [sub_tool]
            name = "sub_tool"
        else:
            tools = [sub.as_tool("sub", "Adds numbers.")]
            name = "sub"
        loop = ReActLoop(
            ZeroLatencyModel(parent_replies(calls, name)),
            tools,
            max_steps=calls + 1,
            max_repeats=None,  # the same call, and the same answer, every turn
            on_event=sink,
            store=store,
        )

        def run() -> object:
            result = loop.run("go")
            assert result.answer == "done" and result.tool_calls >= calls, result.detail
            if how == "agent":  # rolled up: the parent's calls and every sub-run's
                assert result.model_calls == 3 * calls + 1, result.model_calls
            return result

        return run

    return prepare_calls


SETTINGS = ("plain", "sink", "store")
HOWS = {
    "direct": "sub.run() directly",
    "wrapped": "a tool that calls sub.run()",
    "agent": "sub.as_tool()",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 21")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "subagent_overhead.json")
    args = parser.parse_args()
    rounds = 5 if args.quick else 21
    print(describe(), "\n")
    contenders = {(h, s): prepare(h, s) for s in SETTINGS for h in HOWS}
    for prepare_calls in contenders.values():
        timed(prepare_calls, 4)  # warm-up
    us: dict[tuple[str, str], list[float]] = {key: [] for key in contenders}
    keys = list(contenders)
    for r in range(rounds):
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            us[key].append(timed(contenders[key], CALLS, BATCH) * 1e6)
    print(
        "| setting | "
        + " | ".join(f"{HOWS[h]}, us per call" for h in HOWS)
        + " | agent tool's overhead per call | / wrapped |"
    )
    print("|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for s in SETTINGS:
        med = {h: statistics.median(us[(h, s)]) for h in HOWS}
        extra = [a - w for a, w in zip(us[("agent", s)], us[("wrapped", s)], strict=True)]
        ratio = statistics.median(
            a / w for a, w in zip(us[("agent", s)], us[("wrapped", s)], strict=True)
        )
        summary[s] = {**med, "overhead": statistics.median(extra), "ratio": ratio}
        cells = " | ".join(f"{med[h]:,.1f}" for h in HOWS)
        print(f"| {s} | {cells} | {statistics.median(extra):,.1f} us | {ratio:.2f}x |")
    print(
        f"\n{rounds} rounds of {BATCH} runs of {CALLS} calls, CPU time, medians; the overhead "
        "is the median over rounds of the paired difference. A sub-run here is two model "
        "calls and one tool call; the parent adds one turn per call."
    )
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    args.json.parent.mkdir(exist_ok=True)
    samples = {f"{h}/{s}": v for (h, s), v in us.items()}
    args.json.write_text(json.dumps({"us_per_call": samples, "summary": summary}, indent=1))
    print(f"samples written to {os.path.relpath(args.json)}")


if __name__ == "__main__":
    main()
