"""Results and events as JSON (`to_dict()`, `to_json()`), for an SSE or JSON response, and
the wall-clock `ts` every event carries beside its `perf_counter` `at`."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest

from agentloops import (
    Event,
    PlanAndExecute,
    Price,
    ReActLoop,
    ReWOOPipeline,
    Router,
    RunStarted,
    Usage,
    tool,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


SPENT = Usage(input_tokens=10, output_tokens=5)
PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "x", "tool_name": "add", "tool_args": {"a": 1, "b": 2}}
    ]
}


def react() -> Any:
    return ReActLoop(
        ScriptedModel([use_tools(("add", {"a": 1, "b": 2}), usage=SPENT), "3"]),
        [add],
        price=Price(input=1, output=1),
    )


def loops() -> dict[str, Any]:
    return {
        "react": react(),
        "rewoo": ReWOOPipeline(ScriptedModel([respond_structured(PLAN), "3"]), [add]),
        "plan_execute": PlanAndExecute(
            ScriptedModel(
                [
                    respond_structured({"steps": [{"step_number": 1, "description": "add"}]}),
                    "3",
                    "the sum is 3",
                ]
            ),
            [add],
        ),
    }


@pytest.mark.parametrize("name", ["react", "rewoo", "plan_execute"])
def test_every_loops_result_is_json(name: str) -> None:
    result = loops()[name].run("1 + 2?")
    data = json.loads(result.to_json())
    assert data == result.to_dict()
    assert data["result"] == type(result).__name__ and data["answer"] == result.answer
    assert data["usage"]["input_tokens"] == result.usage.input_tokens
    assert data["stop_reason"] == "answered"


def test_a_react_result_keeps_its_transcript_and_exact_cost() -> None:
    result = react().run("1 + 2?")
    data = result.to_dict()
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user", "assistant"]
    assert data["messages"][2]["content"][0]["content"] == "3"  # the tool's result block
    assert data["cost"] == "0.000015" and Decimal(data["cost"]) == result.cost  # exact text


def test_a_rewoo_result_keeps_its_plan_and_evidence() -> None:
    data = loops()["rewoo"].run("1 + 2?").to_dict()
    assert data["plan"]["steps"][0]["tool_name"] == "add"
    assert data["evidence"]["#E1"]["content"] == "3"


def test_a_route_decision_is_json() -> None:
    router = Router(ScriptedModel([respond_structured({"route": "a"})]), {"a": "A"}, default="a")
    assert json.loads(router.route("q").to_json())["route"] == "a"


def test_every_streamed_item_is_json_and_the_last_has_the_answer() -> None:
    items = list(react().stream("1 + 2?"))
    sent = [json.loads(item.to_json()) for item in items]  # what an SSE endpoint writes
    assert all("event" in d for d in sent[:-1])
    assert sent[-1]["result"] == "ReActResult" and sent[-1]["answer"] == "3"
    assert [d["event"] for d in sent[:2]] == ["RunStarted", "ModelCallStarted"]


def test_a_failed_runs_partial_result_is_json() -> None:
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2}))])  # runs out: ScriptExhausted
    with pytest.raises(Exception) as info:
        ReActLoop(model, [add]).run("q")
    data = json.loads(info.value.result.to_json())
    assert data["stop_reason"] == "error" and data["tool_calls"] == 1


def test_events_carry_wall_clock_ts_and_perf_counter_at() -> None:
    before_wall, before_perf = time.time(), time.perf_counter()
    events: list[Event] = []
    ReActLoop(ScriptedModel(["hi"]), [], on_event=events.append).run("q")
    after_wall, after_perf = time.time(), time.perf_counter()
    assert events and all(before_wall <= e.ts <= after_wall for e in events)
    assert all(before_perf <= e.at <= after_perf for e in events)
    assert [e.ts for e in events] == sorted(e.ts for e in events)
    data = RunStarted(loop="react", run_id="r").to_dict()
    assert set(data) >= {"event", "loop", "run_id", "at", "ts"}
