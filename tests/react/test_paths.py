"""ReAct's fast paths give the same run as its general path.

The common turn (one call that no policy or tool rule vets) skips the verdicts, slicing and
decisions of `_act`, and the sync driver skips its event plumbing when nobody listens. Each
fast path is only a shortcut: the same scripted run, driven once through the fast paths and
once through the general ones (an approval policy that allows everything, an event sink,
the async driver), must give the same transcript, the same totals, the same requests and
the same idempotency keys.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloops import (
    Message,
    ModelResponse,
    ReActLoop,
    ReActResult,
    ToolCall,
    Usage,
    idempotency_key,
    tool,
)
from agentloops.events import Event, ToolCallFinished
from agentloops.testing import ScriptedModel, respond, use_tools

U = Usage(input_tokens=7, output_tokens=3)
KEYS: list[tuple[str, str | None]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    KEYS.append(("add", idempotency_key()))
    return a + b


@tool(requires_approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount (a person approves more than 100)."""
    KEYS.append(("pay", idempotency_key()))
    return f"paid {amount}"


def turn(*calls: ToolCall) -> ModelResponse:
    return ModelResponse(Message("assistant", calls), "tool_use", U)


SCRIPT = [
    turn(ToolCall("c1", "add", {"a": 1, "b": 2})),  # the common turn
    turn(ToolCall("c2", "add", {"a": 3, "b": 4}), ToolCall("c3", "add", {"a": "x"})),  # parallel
    turn(ToolCall("c4", "pay", {"amount": 5})),  # a tool rule that says "no need to ask"
    turn(ToolCall("c5", "nope", {})),  # an unknown tool: an error result
    turn(ToolCall("c1", "add", {"a": 5, "b": 6})),  # a reused call id, repaired
    use_tools(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2}), ("add", {"a": 3, "b": 3})),
    respond("done", usage=U),
]


def drive(way: str) -> tuple[ReActResult, ScriptedModel, list[Any], list[Event]]:
    KEYS.clear()
    events: list[Event] = []
    model = ScriptedModel(list(SCRIPT))
    loop = ReActLoop(
        model,
        [add, pay],
        max_calls_per_turn=2,  # the three-call turn runs two; the third gets a note
        approval=(lambda call: "allow") if "policy" in way else None,
        on_event=events.append if "observed" in way else None,
    )
    if "async" in way:
        result = asyncio.run(loop.arun("go", run_id="r"))
    else:
        result = loop.run("go", run_id="r")
    model.assert_complete()
    return result, model, sorted(KEYS), events


def summary(result: ReActResult) -> tuple[Any, ...]:
    return (
        result.answer,
        result.stop_reason,
        result.messages,
        result.usage,
        result.model_calls,
        result.tool_calls,
        result.steps,
    )


@pytest.mark.parametrize("way", ["policy", "observed", "policy observed", "async", "policy async"])
def test_the_fast_paths_and_the_general_path_give_the_same_run(way: str) -> None:
    fast, fast_model, fast_keys, _ = drive("fast")
    assert fast.stop_reason == "answered" and fast.tool_calls == 8  # every kind of turn ran
    general, model, keys, _ = drive(way)
    assert summary(general) == summary(fast)
    assert [r.messages for r in model.requests] == [r.messages for r in fast_model.requests]
    assert keys == fast_keys and len(keys) == 6  # bad arguments or an unknown tool run nothing


def test_the_fast_and_the_general_path_emit_the_same_tool_events() -> None:
    def seen(events: list[Event]) -> list[tuple[str, str]]:
        """The events in order, but the calls of a parallel turn finish in any order: each
        run of consecutive `ToolCallFinished` is compared as a set (sorted)."""
        out: list[tuple[str, str]] = []
        finished: list[tuple[str, str]] = []
        for e in events:
            if isinstance(e, ToolCallFinished):
                finished.append((e.call_id, e.outcome.content))
                continue
            out += [("ToolCallFinished", f"{i}: {c}") for i, c in sorted(finished)]
            finished.clear()
            out.append((type(e).__name__, ""))
        return out

    _, _, _, fast = drive("observed")
    _, _, _, general = drive("policy observed")
    assert seen(general) == seen(fast) and len(fast) > 2 * len(SCRIPT)
