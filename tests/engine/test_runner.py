"""The loop runner's one run-id rule: a run the caller gave no id gets `new_run_id()`, whichever
loop it is and however it starts (the runner, a loop's `machine()` alone, a ReWOO stage)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from agentloops import (
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    ReWOOPlan,
    idempotency_key,
    tool,
)
from agentloops.engine import sync
from agentloops.engine.host import ToolHost
from agentloops.engine.runner import new_run_id
from agentloops.testing import ScriptedModel, respond_structured

RULE = re.compile(r"[0-9a-f]{12}")
KEYS: list[str | None] = []
PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "add", "tool_name": "add", "tool_args": {"a": 1, "b": 2}}
    ]
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    KEYS.append(idempotency_key())
    return a + b


def react() -> Any:
    return ReActLoop(ScriptedModel(["Paris."]), [add])


def rewoo() -> Any:
    return ReWOOPipeline(ScriptedModel([respond_structured(PLAN), "3"]), [add])


def plan_execute() -> Any:
    plan = {"steps": [{"step_number": 1, "description": "answer"}]}
    return PlanAndExecute(ScriptedModel([respond_structured(plan), "found", "report"]))


LOOPS: list[Callable[[], Any]] = [react, rewoo, plan_execute]


def test_a_new_run_id_is_twelve_hex_digits_and_new_each_time() -> None:
    ids = {new_run_id() for _ in range(100)}
    assert len(ids) == 100 and all(RULE.fullmatch(i) for i in ids)


@pytest.mark.parametrize("make", LOOPS, ids=["react", "rewoo", "plan_execute"])
def test_every_loop_names_a_run_by_the_one_rule_whether_run_or_driven_alone(make) -> None:
    ran = make().run("q")
    alone = make()
    driven = sync.run(alone.machine("q"), ToolHost(alone.tools))
    assert RULE.fullmatch(ran.run_id) and RULE.fullmatch(driven.run_id)
    assert ran.run_id != driven.run_id
    assert make().run("q", run_id="mine").run_id == "mine"


def test_rewoo_stages_alone_get_a_run_id_too_so_their_calls_keys_never_repeat() -> None:
    plan = ReWOOPlan.model_validate(PLAN)
    KEYS.clear()
    pipeline = ReWOOPipeline(ScriptedModel([]), [add])
    pipeline.work(plan)
    pipeline.work(plan)
    pipeline.work(plan, run_id="w")
    first, second, named = KEYS
    assert first != second and RULE.fullmatch(str(first).partition(":")[0])
    assert named == "w:plan0:#E1"
