"""Budgets across a tree of runs (`engine.tree`): a run's `max_total_tokens`,
`max_tool_calls`, `max_cost` and `deadline` bound what its sub-runs spend, live, across
sub-runs that run at once; and the tree's own records (`Node`)."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import pytest
from _subagents import USAGE, add_tool, calls, results_of

from agentloops import (
    ConfigurationError,
    ModelRequest,
    ModelResponse,
    Price,
    ReActLoop,
    ToolCall,
    Usage,
)
from agentloops.engine.tree import Limits, Node
from agentloops.messages import SubRun, ToolOutcome
from agentloops.testing import FunctionModel, ScriptedModel, respond, use_tools

DRIVERS = ("sync", "async")
PRICE = Price(input=1000, output=2000)  # per million: 10 in + 5 out = 0.02 per call


def drive(loop: Any, task: str, driver: str) -> Any:
    return loop.run(task) if driver == "sync" else asyncio.run(loop.arun(task))


def busy(pause: float = 0.0) -> FunctionModel:
    """A sub-agent's model that adds, and adds again, and never answers by itself."""

    def reply(request: ModelRequest) -> ModelResponse:
        if pause:
            time.sleep(pause)
        n = len(results_of(request.messages))
        return calls(ToolCall(f"{request.messages[0].text}-{n}", "add", {"a": n, "b": 1}))

    return FunctionModel(reply)


def parent(*tools: Any, **options: Any) -> ReActLoop:
    """Calls the sub-agent(s) `sub` (and `sub2`) once, then answers."""

    def reply(request: ModelRequest) -> ModelResponse:
        if not results_of(request.messages):
            names = [t.name for t in tools]
            return calls(*(ToolCall(f"call-{n}", n, {"task": n}) for n in names))
        return respond("parent done", usage=USAGE)

    return ReActLoop(FunctionModel(reply), list(tools), **options)


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_parents_token_budget_stops_its_sub_run_and_then_the_parent(driver: str) -> None:
    inner = ReActLoop(busy(), [add_tool()], max_steps=50)
    result = drive(parent(inner.as_tool("sub", "Adds."), max_total_tokens=50), "go", driver)
    (run,) = result.subruns
    assert run.stop_reason == "budget"
    assert "max_total_tokens=50 of the top run reached after 60" in run.detail
    assert run.model_calls == 3  # 15 (the parent's call) + 3 x 15 reached 50
    assert result.stop_reason == "budget" and result.usage.total_tokens == 60
    assert "sub stopped without an answer (budget:" in results_of(result.messages)[0]


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_parents_tool_call_budget_stops_its_sub_run(driver: str) -> None:
    inner = ReActLoop(busy(), [add_tool()], max_steps=50)
    result = drive(parent(inner.as_tool("sub", "Adds."), max_tool_calls=3), "go", driver)
    (run,) = result.subruns
    assert run.stop_reason == "budget" and "max_tool_calls=3" in run.detail
    assert run.tool_calls == 2  # the parent's call of it is the first of the three
    assert result.tool_calls == 3 and result.answer == "parent done"


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_parents_max_cost_stops_its_sub_run_priced_at_the_parents_prices(driver: str) -> None:
    inner = ReActLoop(busy(), [add_tool()], max_steps=50)  # no prices of its own
    loop = parent(inner.as_tool("sub", "Adds."), max_cost="0.07", price=PRICE)
    result = drive(loop, "go", driver)
    (run,) = result.subruns
    assert run.stop_reason == "budget" and "max_cost=0.07" in run.detail
    assert run.model_calls == 3 and run.cost == Decimal("0.06")
    assert result.stop_reason == "budget"
    assert result.cost == Decimal("0.08")  # its own call, and the sub-run's three
    assert result.cost_by_role == {"react": Decimal("0.02"), "sub": Decimal("0.06")}


def test_a_sub_run_with_prices_of_its_own_counts_at_those() -> None:
    inner = ReActLoop(
        ScriptedModel([respond("inner", usage=USAGE)]), [], price=Price(input=0, output=0)
    )
    loop = parent(inner.as_tool("sub", "Asks."), price=PRICE)
    result = loop.run("go")
    assert result.subruns[0].cost == Decimal(0)
    assert result.cost == Decimal("0.04") and result.cost_by_role["sub"] == 0


def test_a_parent_without_prices_reports_no_cost_whatever_its_sub_runs_cost() -> None:
    inner = ReActLoop(ScriptedModel([respond("inner", usage=USAGE)]), [], price=PRICE)
    result = parent(inner.as_tool("sub", "Asks.")).run("go")
    assert result.subruns[0].cost == Decimal("0.02") and result.cost is None


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_parents_deadline_stops_its_sub_run(driver: str) -> None:
    inner = ReActLoop(busy(pause=0.15), [add_tool()], max_steps=50)
    result = drive(parent(inner.as_tool("sub", "Adds."), deadline=0.4), "go", driver)
    (run,) = result.subruns
    assert run.stop_reason == "deadline"
    assert 1 <= run.model_calls <= 3
    assert result.stop_reason == "deadline"


@pytest.mark.parametrize("driver", DRIVERS)
def test_sub_runs_that_run_at_once_share_the_parents_budget(driver: str) -> None:
    inner = ReActLoop(busy(pause=0.01), [add_tool()], max_steps=50)
    loop = parent(
        inner.as_tool("sub", "Adds."), inner.as_tool("sub2", "Adds."), max_total_tokens=150
    )
    result = drive(loop, "go", driver)
    assert {r.stop_reason for r in result.subruns} == {"budget"}
    spent = sum(r.usage.total_tokens for r in result.subruns)
    # Alone, each would have spent up to 150; together they stop at the parent's 150 (its
    # own 15 included), each at most one call past it.
    assert 135 <= spent <= 135 + 2 * 15
    assert result.stop_reason == "budget"


def test_a_nodes_totals_count_running_sub_runs_once_and_settled_ones_once() -> None:
    top = Node(Limits(max_total_tokens=100))
    child = top.child(Limits(), "top:c1", "sub")
    child.spend(Usage(input_tokens=30), None)
    assert top.totals() == (30, 1, None)  # live, and not priced; its call counts
    run = SubRun(
        name="sub", call_id="c1", run_id="top:c1", loop="react", stop_reason="answered",
        usage=Usage(input_tokens=30), tool_calls=2, cost=Decimal(1),
    )  # fmt: skip
    top.counted(ToolOutcome(content="ok", run=run))
    assert top.totals() == (30, 3, Decimal(1)) and top.live == []
    other = top.child(Limits(), "top:c2", "sub")
    assert top.totals()[1] == 4
    other.detach()
    assert top.live == [] and top.totals()[1] == 3


def test_a_nodes_depth_limit_is_the_nearest_of_its_ancestors() -> None:
    top = Node(Limits(max_depth=2))
    one = top.child(Limits(max_depth=5), "a", "a")
    two = one.child(Limits(max_depth=5), "b", "b")
    assert one.too_deep() is None
    assert two.too_deep() == (
        "a sub-run here would be 3 levels deep, past max_depth=2 (at the run > a > b)"
    )


def test_a_sub_runs_own_max_cost_counts_its_sub_runs_too() -> None:
    node = Node(Limits(max_cost=Decimal(1)))
    child = node.child(Limits(), "x", "x")
    child.spend(Usage(input_tokens=1_000_000), PRICE)
    stop = node.exhausted()
    assert stop is not None and stop.stop_reason == "budget"
    assert "max_cost=1 reached after 1000" in stop.detail


def test_max_depth_below_zero_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="max_depth must be >= 0"):
        ReActLoop(ScriptedModel([]), [], max_depth=-1)


def test_a_run_without_agent_tools_is_no_tree() -> None:
    loop = ReActLoop(ScriptedModel([use_tools(("add", {"a": 1, "b": 2})), "3"]), [add_tool()])
    assert loop._host().limits is None
    assert loop.run("go").subruns == []
