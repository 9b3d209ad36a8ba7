"""The Market Analyst's fixture data, tools and offline demo model (the parts below the graph)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from market_analyst import data, facts, recommend, tools, writers
from market_analyst.demo_model import DemoModel
from market_analyst.prompts import ROUTER_SYSTEM, ROUTES
from market_analyst.report import AnalystReport, KeyFigure, md_inline, unsupported_figures
from market_analyst.tickers import tickers_in

from agentloops import ReActLoop, Router, ToolRegistry
from agentloops.testing import ScriptedModel, use_tools

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")


def test_fixture_set_is_labelled_and_large_enough() -> None:
    assert len(data.TICKERS) >= 8
    assert "not live market data" in data.SOURCE
    assert "NOT live market data" in data.NOTICE


@pytest.mark.parametrize("ticker", data.TICKERS)
def test_fixture_figures_agree_with_each_other(ticker: str) -> None:
    snap, fin = data.snapshot(ticker), data.financials(ticker)
    history = data.price_history(ticker)
    closes = [c for _, c in history]
    assert snap["price"] == closes[-1] and snap["previous_close"] == closes[-2]
    assert (snap["week52_low"], snap["week52_high"]) == (min(closes), max(closes))
    shares = data.company(ticker)["shares_b"]
    assert snap["market_cap_b"] == round(snap["price"] * shares, 1)
    assert snap["eps"] == fin["fiscal_years"][0]["eps"]
    if snap["pe_ratio"] is not None:
        assert snap["pe_ratio"] == round(snap["price"] / snap["eps"], 1)
    assert [y["fiscal_year"] for y in fin["fiscal_years"]] == [2025, 2024, 2023]
    assert len(history) == data.HISTORY_DAYS and history[-1][0] == data.AS_OF
    assert all(p["ticker"] in data.TICKERS for p in data.competitors(ticker)["peers"])


def test_fixture_data_is_deterministic() -> None:
    data.price_history.cache_clear()
    first = data.history_window("NVDA", 30)
    data.price_history.cache_clear()
    assert data.history_window("NVDA", 30) == first


def test_tools_answer_with_labelled_json() -> None:
    registry = ToolRegistry(tools.ALL_TOOLS)
    for name, args in [
        ("get_stock_snapshot", {"ticker": "nvda"}),
        ("get_price_history", {"ticker": "NVDA", "days": 10}),
        ("search_news", {"ticker": "NVDA", "limit": 2}),
        ("search_competitors", {"ticker": "NVDA"}),
        ("get_financials", {"ticker": "NVDA"}),
    ]:
        outcome = registry.call(name, args)
        assert not outcome.is_error, outcome.content
        body = json.loads(outcome.content)
        assert body["ticker"] == "NVDA" and body["source"] == data.SOURCE
    assert (
        len(json.loads(registry.call("get_price_history", {"ticker": "AMD"}).content)["closes"])
        == 30
    )


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("get_stock_snapshot", {"ticker": "XYZ"}, "unknown ticker 'XYZ'; known tickers: AAPL"),
        ("search_news", {"ticker": "XYZ"}, "unknown ticker 'XYZ'"),
        ("get_price_history", {"ticker": "NVDA", "days": 999}, "days must be between 5 and 252"),
        ("search_news", {"ticker": "NVDA", "limit": 0}, "limit must be between 1 and 10"),
    ],
)
def test_bad_input_is_an_error_the_model_can_act_on(name: str, args: dict, expected: str) -> None:
    outcome = ToolRegistry(tools.ALL_TOOLS).call(name, args)
    assert outcome.is_error and expected in outcome.content


def test_execute_trade_waits_for_approval_and_runs_once(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    trade = use_tools(("execute_trade", {"ticker": "MSFT", "side": "buy", "quantity": 3}))
    loop = ReActLoop(ScriptedModel([trade, "Bought."]), tools.ALL_TOOLS)
    paused = loop.run("Buy 3 MSFT")
    assert paused.stop_reason == "approval_required" and not ledger.exists()
    done = loop.resume(paused, {paused.pending_approvals[0].id: True})
    assert done.answer == "Bought."
    [entry] = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert entry["ticker"] == "MSFT" and entry["price"] == data.snapshot("MSFT")["price"]
    assert tools.execute_trade.requires_approval and not tools.execute_trade.read_only


def test_simulated_latency_can_be_scaled() -> None:
    tools.configure(latency_scale=0.1)
    outcome = ToolRegistry(tools.RESEARCH_TOOLS).call("search_news", {"ticker": "NVDA"})
    assert outcome.seconds >= tools.LATENCY["search_news"] * 0.1
    with pytest.raises(ValueError, match="latency_scale"):
        tools.configure(latency_scale=-1)


@pytest.mark.parametrize(
    ("task", "route", "tickers"),
    [
        ("Quick snapshot of NVDA", writers.FLASH, ["NVDA"]),
        ("Investment thesis and strategic risks for MSFT", writers.DEEP, ["MSFT"]),
        ("How is Apple doing today?", writers.FLASH, ["AAPL"]),
        ("Compare AMD and INTC", writers.DEEP, ["AMD", "INTC"]),
        ("Quick snapshot of XYZ", writers.FLASH, ["XYZ"]),
        ("Tell me about NVDA", writers.DEEP, ["NVDA"]),
        ("what about msft and nvidia?", writers.DEEP, ["MSFT", "NVDA"]),
    ],
)
def test_demo_router_follows_the_routing_rule(task: str, route: str, tickers: list[str]) -> None:
    decision = Router(DemoModel(), ROUTES, default=writers.DEEP, system=ROUTER_SYSTEM).route(task)
    assert decision.route == route and not decision.fallback
    assert writers.tickers_in(task) == tickers


def test_demo_router_reads_the_unclear_rule_from_its_prompt_not_from_its_code() -> None:
    plain = {name: text.split(", and any request")[0] for name, text in ROUTES.items()}
    assert all("unclear" not in text for text in plain.values())
    router = Router(DemoModel(), plain, default=writers.DEEP)  # the library's own prompt
    assert router.route("Tell me about NVDA").route == writers.FLASH  # no rule given


@pytest.mark.parametrize(
    ("text", "tickers"),
    [
        ("nvda", ["NVDA"]),
        ("Compare Msft with googl", ["MSFT", "GOOGL"]),
        ("[link=http://x]NVDA[/link]", ["NVDA"]),
        ("A CEO said EPS rose", []),
        ("AAPL AMD INTC NVDA", ["AAPL", "AMD", "INTC"]),
        ("   ", []),
    ],
)
def test_tickers_in(text: str, tickers: list[str]) -> None:
    assert tickers_in(text) == tickers


def test_demo_executor_runs_real_tools_and_reports_only_their_figures() -> None:
    loop = ReActLoop(
        DemoModel(),
        tools.RESEARCH_TOOLS,
        system="You are the executor of a Plan-and-Execute agent.",
    )
    result = loop.run("Get the snapshot and 90-day price history of MSFT")
    assert result.tool_calls == 2 and result.model_calls == 2
    evidence = data.snapshot("MSFT"), data.history_window("MSFT", 90)
    assert "497.41" in result.answer
    assert facts.unsupported_numbers(result.answer, json.dumps(evidence)) == []
    assert result.usage.total_tokens > 0 and result.usage.cache_read_tokens > 0


def test_demo_verdict_catches_invented_figures_and_unknown_tickers() -> None:
    evidence = json.dumps(data.snapshot("NVDA"))
    good = writers.flash_briefing("Quick snapshot of NVDA", evidence)
    assert recommend.verdict(good, evidence)["verdict"] == "pass"
    assert recommend.verdict(good + " Target price 250.", evidence)["verdict"] == "fail"
    missing = "'get_stock_snapshot' failed: UnknownTicker: unknown ticker 'XYZ'; known ..."
    briefing = writers.flash_briefing("Quick snapshot of XYZ", missing)
    assert facts.numbers(briefing) == set()
    assert recommend.verdict(briefing, missing)["verdict"] == "needs_human"


def test_demo_verdict_checks_each_key_figure_against_the_output_it_cites() -> None:
    evidence = f"[E1] snapshot -> {json.dumps(data.snapshot('NVDA'))}\n[E2] news -> {{}}"
    row = "| NVDA last close | 157.99 USD | E1 (get_stock_snapshot NVDA) |"
    assert recommend.verdict(row, evidence)["verdict"] == "pass"
    wrong = row.replace("E1 (", "E2 (")  # the same figure, cited to an output without it
    assert recommend.verdict(wrong, evidence)["verdict"] == "fail"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("157.99", "157.99"),
        ("-5.2%", "-5.2%"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a\n# Forged", "a # Forged"),
        ("# Forged", "\\# Forged"),
        ("1. item", "1\\. item"),
        ("- item", "\\- item"),
        ("[x](http://e)", "\\[x\\](http://e)"),
        ("a | b *c* `d` _e_", "a \\| b \\*c\\* \\`d\\` \\_e\\_"),
    ],
)
def test_md_inline_shows_text_as_written(text: str, shown: str) -> None:
    assert md_inline(text) == shown


def _figure(value: str, source: str) -> KeyFigure:
    return KeyFigure(label="price", value=value, unit="USD", source=source)


@pytest.mark.parametrize(
    ("figure", "problem"),
    [
        (_figure("157.99", "E1"), None),
        (_figure("157.99", "e1"), None),
        (_figure("158", "E1"), "is not in E1"),
        (_figure("157.99", "E9"), "no evidence of this run"),
        (_figure("157.99", "E2"), "a tool call that failed"),
        (_figure("high", "E1"), "holds no figure"),
    ],
)
def test_unsupported_figures(figure: KeyFigure, problem: str | None) -> None:
    snapshot = json.dumps(data.snapshot("NVDA"))
    evidence = [
        {"name": "get_stock_snapshot", "args": {}, "is_error": False, "content": snapshot},
        {"name": "search_news", "args": {}, "is_error": True, "content": "unknown ticker"},
    ]
    report = AnalystReport(
        title="t",
        tickers=["NVDA"],
        recommendation="hold",
        confidence="low",
        thesis="",
        risks=[],
        key_figures=[figure],
    )
    problems = unsupported_figures(report, evidence)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_demo_replanner_drops_steps_only_when_no_ticker_is_known() -> None:
    failed = "Findings so far:\nStep 1 (x): - Data problem: the tools do not know 'XYZ'\n"
    mixed = failed + "- NVDA last closed at 157.99 USD.\n"
    assert recommend.revision(failed + "Remaining steps:\n2. y")["revise"] is True
    assert recommend.revision(mixed + "Remaining steps:\n2. y")["revise"] is False
