"""Agent tools under issue 19's rules, under both drivers: a failed sink loses no sub-run
that came back in a parallel turn and starts no new work below; a tool's own
`CancelledError` inside a sub-run is that call's failure; sub-run events carry their
parent's run id and a wall-clock `ts` (in `to_dict` too), and a sub-run's model calls the
role of their request; a result with sub-runs is JSON."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from _cancel_helpers import shaky
from _subagents import KINDS, TASK, add_tool, parent_loop, sub_loop

from agentloops import (
    Event,
    ModelCallFinished,
    ReActLoop,
    RecordWriteError,
    ToolCallFinished,
    tool,
    validate_transcript,
)
from agentloops.testing import ScriptedModel, use_tools

DRIVERS = ("sync", "async")
ROLES = {"react": {"react"}, "rewoo": {"planner", "solver"}, "pe": {"planner", "executor"}}
"""The roles a sub-agent of each kind asks its model calls for (at least these)."""


def drive(loop: Any, task: Any, driver: str, **options: Any) -> Any:
    if driver == "sync":
        return loop.run(task, **options)
    return asyncio.run(asyncio.wait_for(loop.arun(task, **options), 20))


class FailsAt:
    """A sink that fails as a full disk does at the first event `hit` picks."""

    def __init__(self, hit: Any):
        self.hit, self.seen = hit, []

    def __call__(self, event: Event) -> None:
        if self.hit(event):
            raise RecordWriteError("No space left on device", path="events.jsonl", errno=28)
        self.seen.append(event)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sink_failing_in_a_parallel_turn_keeps_the_sub_run_that_came_back(driver: str) -> None:
    release = threading.Event()

    @tool
    def late() -> str:
        """Waits until the test lets it go."""
        release.wait(10)
        return "late"

    model = ScriptedModel([use_tools(("sub", {"task": TASK}), ("late", {})), "never"])
    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    sink = FailsAt(lambda e: isinstance(e, ToolCallFinished) and e.name == "sub")
    loop = ReActLoop(model, [sub, late], on_event=sink)
    try:
        with pytest.raises(RecordWriteError) as info:
            drive(loop, "q", driver, run_id="top")
    finally:
        release.set()
    result = info.value.result
    assert result.stop_reason == "error" and model.calls == 1  # no new model call
    assert [r.content for r in result.held_results] == ["sum=5"]
    (run,) = result.subruns  # the sub-run that came back, and what it spent, are the run's
    assert run.run_id.startswith("top:") and (run.stop_reason, run.model_calls) == ("answered", 2)
    assert result.model_calls == 1 + 2 and result.tool_calls == 1 + 1  # its add is counted


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sink_failing_inside_a_sub_run_starts_no_new_work_below(driver: str) -> None:
    # A turn's lone call: the sub-run is driven on the driver's thread (or task), so it
    # learns of the failure at once. On a thread of a parallel turn it learns of it when
    # the driver's thread has handed its event on, which may be after its next call began.
    log: list[str] = []
    sub = sub_loop("react", log).as_tool("sub", "Adds numbers.")
    model = ScriptedModel([use_tools(("sub", {"task": TASK})), "never"])
    inner_add = lambda e: isinstance(e, ToolCallFinished) and e.parent_run_id == "top"  # noqa: E731
    with pytest.raises(RecordWriteError) as info:
        drive(ReActLoop(model, [sub], on_event=FailsAt(inner_add)), "q", driver, run_id="top")
    assert log == ["sub-react", "add(2,3)"]  # its second model call never started
    result = info.value.result
    assert result is not None and result.stop_reason == "error" and model.calls == 1
    validate_transcript(result.messages, allow_pending=True)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("calls", [["sub", "add"], ["sub"]], ids=["parallel", "alone"])
def test_a_tools_own_cancelled_error_in_a_sub_run_is_that_calls_failure(
    calls: list[str], driver: str
) -> None:
    inner_model = ScriptedModel([use_tools(("shaky", {})), "coped"])
    sub = ReActLoop(inner_model, [shaky]).as_tool("sub", "Copes.")
    args = {"sub": {"task": "x"}, "add": {"a": 1, "b": 1}}
    model = ScriptedModel([use_tools(*((n, args[n]) for n in calls)), "done"])
    result = drive(ReActLoop(model, [sub, add_tool()]), "q", driver)
    assert result.answer == "done"
    assert [r.content for r in model.requests[1].messages[-1].tool_results] == ["coped", "2"][
        : len(calls)
    ]
    (inner,) = inner_model.requests[1].messages[-1].tool_results
    assert inner.is_error and "CancelledError" in inner.content


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("inner", KINDS)
def test_sub_run_events_carry_their_parent_a_ts_and_their_requests_role(
    inner: str, driver: str
) -> None:
    events: list[Event] = []
    sub = sub_loop(inner).as_tool("sub", "Adds numbers.")
    result = drive(parent_loop("react", sub, on_event=events.append), TASK, driver, run_id="top")
    below = [e for e in events if e.run_id.startswith("top:")]
    assert below and all(e.parent_run_id is not None and e.ts > 0 for e in below)
    for e in below:
        data = json.loads(e.to_json())
        assert data["parent_run_id"] == e.parent_run_id and data["ts"] == e.ts
    roles = {e.role for e in below if isinstance(e, ModelCallFinished)}
    assert ROLES[inner] <= roles and "" not in roles
    top = {e.role for e in events if isinstance(e, ModelCallFinished) and e.run_id == "top"}
    assert top == {"react"}
    data = json.loads(result.to_json())  # a result with sub-runs is JSON, each as its dict
    (run,) = data["subruns"]
    assert (run["name"], run["run_id"], run["stop_reason"]) == ("sub", "top:outer_1", "answered")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("outer", KINDS)
def test_a_sink_failing_after_a_sub_run_came_back_counts_it_in_each_kind(
    outer: str, driver: str
) -> None:
    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    sink = FailsAt(lambda e: isinstance(e, ToolCallFinished) and e.name == "sub")
    with pytest.raises(RecordWriteError) as info:
        drive(parent_loop(outer, sub, on_event=sink), TASK, driver, run_id="top")
    result = info.value.result
    (run,) = result.subruns
    assert (run.stop_reason, run.model_calls) == ("answered", 2)
    before = {"react": 1, "rewoo": 1, "pe": 2}[outer]  # the caller's own calls until then
    assert result.model_calls == before + 2
