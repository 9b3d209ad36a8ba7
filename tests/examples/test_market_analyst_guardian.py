"""The Market Analyst's trade guardian: each rule, through the trade proposal's ReAct loop
(the library's approval predicate and policy), the trade store's claims and the keyed
ledger. The trader's model is scripted per test, so each test proposes the trade it
checks; the offline stand-in's own trades are tested in test_market_analyst_trades.py."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pydantic
import pytest
from market_analyst import tools
from market_analyst.guardian import Guardian
from market_analyst.memory import Profile
from market_analyst.store import AnalystStore
from market_analyst.trades import UnknownTrade
from market_analyst.trading import NotTradable, NotWaiting, Trader

from agentloops import RunLeased, ToolCall
from agentloops.testing import ScriptedModel, use_tools

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")

PRICES = {"GOOGL": 176.23, "INTC": 22.4, "AMZN": 219.39}  # the fixture data's last closes


def pending(store: AnalystStore, run_id: str, recommendation: str, *tickers: str) -> None:
    """A run waiting for a decision, its journal written as the analyst writes it (without
    running the analyst)."""
    draft = {"title": f"Report on {' '.join(tickers)}", "tickers": list(tickers)}
    store.create(run_id, f"Snapshot of {' '.join(tickers)}")
    with store.hold(run_id) as run:
        run.add("route", {"route": "flash_briefing", "route_reasoning": "test"})
        run.add("research", {"notes": "notes", "evidence": []})
        run.add(
            "draft",
            {"draft": "## Draft", "draft_record": {**draft, "recommendation": recommendation}},
        )
        run.add("verdict", {"verdict": {"verdict": "pass", "reasons": []}}, status="pending")


def publish(store: AnalystStore, run_id: str, recommendation: str, *tickers: str) -> None:
    """A published report, as `AnalystStore.decide` leaves one."""
    pending(store, run_id, recommendation, *tickers)
    store.decide(run_id, True, by="alice", via="test")


def trade(ticker: str, side: str, quantity: int) -> Any:
    return use_tools(("execute_trade", {"ticker": ticker, "side": side, "quantity": quantity}))


def ledger(store: AnalystStore) -> list[dict[str, Any]]:
    return tools.ledger_entries(store.ledger_path)


@pytest.fixture
def store(tmp_path: Path) -> AnalystStore:
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    store.profile.update(holdings={"INTC": 100}, auto_approve_usd=1000, hard_limit_usd=10000)
    publish(store, "ma-buy", "buy", "GOOGL")
    publish(store, "ma-sell", "sell", "INTC")
    return store


# -- the rules ---------------------------------------------------------------------------


def test_a_small_trade_inside_the_limits_goes_through_unasked(store: AnalystStore) -> None:
    model = ScriptedModel([trade("GOOGL", "buy", 5), "Bought 5 GOOGL."])
    result, new = Trader(model, store).propose("ma-buy", by="alice")
    assert new and result["status"] == "executed"
    [entry] = ledger(store)
    assert (entry["ticker"], entry["side"], entry["quantity"]) == ("GOOGL", "buy", 5)
    assert entry["trade_id"] == "tr-buy" and entry["approved_by"] == "guardian"
    assert entry["value_usd"] == round(5 * PRICES["GOOGL"], 2) <= 1000
    assert result["calls"][0]["verdict"] == "auto" and result["answer"] == "Bought 5 GOOGL."
    model.assert_complete()


def test_a_large_trade_waits_and_runs_once_when_approved(store: AnalystStore) -> None:
    model = ScriptedModel([trade("GOOGL", "buy", 28)])
    waiting, _ = Trader(model, store).propose("ma-buy", by="alice")
    assert waiting["status"] == "waiting" and waiting["calls"][0]["verdict"] == "ask"
    assert ledger(store) == []  # nothing waiting has run
    # Decided later, by another Trader (as another process would), from the saved pause.
    later = ScriptedModel(["Bought 28 GOOGL."])
    done, changed = Trader(later, store).decide("tr-buy", True, by="bob", via="cli")
    assert changed and done["status"] == "executed"
    [entry] = ledger(store)
    assert entry["quantity"] == 28 and entry["value_usd"] == round(28 * PRICES["GOOGL"], 2)
    assert (entry["approved_by"], entry["via"]) == ("bob", "cli")
    assert done["decision"]["by"] == "bob" and done["pending"] == []
    assert store.runs.run_info("tr-buy/trader").status == "finished"  # the loop's journal
    later.assert_complete()


def test_a_trade_over_the_hard_limit_is_refused_and_never_reaches_the_ledger(
    store: AnalystStore,
) -> None:
    model = ScriptedModel([trade("GOOGL", "buy", 100), "The guardian refused it."])
    result, _ = Trader(model, store).propose("ma-buy", by="alice")
    assert result["status"] == "refused" and ledger(store) == []
    [call] = result["calls"]
    assert call["verdict"] == "refused"
    assert call["reasons"] == ["17,623.00 USD is over the hard limit of 10,000 USD"]
    # The model was told the call was denied (the library's denial result).
    denied = model.requests[-1].messages[-1].tool_results[0]
    assert denied.is_error and "denied" in denied.content


@pytest.mark.parametrize(
    ("run_id", "call", "profile", "reason"),
    [
        (
            "ma-buy",
            ("GOOGL", "buy", 1),
            {"trade_tickers": ["MSFT", "NVDA"]},
            "GOOGL is not among the profile's tradable tickers (MSFT, NVDA)",
        ),
        ("ma-sell", ("INTC", "sell", 101), {}, "selling 101 INTC is more than the 100 shares held"),
        ("ma-sell", ("INTC", "sell", 1), {"holdings": {}}, "more than the 0 shares held"),
        ("ma-buy", ("AMZN", "buy", 1), {}, "AMZN is not in the approved report (it covers GOOGL)"),
        ("ma-buy", ("GOOGL", "sell", 1), {}, "the approved report recommends buy, not sell"),
        ("ma-buy", ("GOOGL", "buy", 0), {}, "quantity must be at least 1, got 0"),
        ("ma-buy", ("GOOGL", "hold", 1), {}, "invalid arguments: side"),
    ],
)
def test_a_trade_outside_the_profile_or_the_report_is_refused_even_when_small(
    store: AnalystStore, run_id: str, call: tuple[str, str, int], profile: dict, reason: str
) -> None:
    store.profile.update(**profile)
    ticker, side, quantity = call
    model = ScriptedModel([trade(ticker, side, quantity), "Not traded."])
    result, _ = Trader(model, store).propose(run_id, by="alice")
    assert result["status"] == "refused" and ledger(store) == []
    assert any(reason in r for r in result["calls"][0]["reasons"]), result["calls"]


def test_a_denied_trade_never_reaches_the_ledger(store: AnalystStore) -> None:
    Trader(ScriptedModel([trade("GOOGL", "buy", 28)]), store).propose("ma-buy", by="alice")
    model = ScriptedModel(["Not bought: the person said no."])
    denied, changed = Trader(model, store).decide("tr-buy", False, by="bob", via="web")
    assert changed and denied["status"] == "denied" and ledger(store) == []
    result = model.requests[0].messages[-1].tool_results[0]
    assert result.is_error and "denied" in result.content


def test_a_second_decision_on_the_same_trade_is_refused(store: AnalystStore) -> None:
    Trader(ScriptedModel([trade("GOOGL", "buy", 28)]), store).propose("ma-buy", by="alice")
    Trader(ScriptedModel(["Bought."]), store).decide("tr-buy", True, by="bob", via="cli")
    for approve in (True, False):  # a model call here would fail: the script is empty
        again, changed = Trader(ScriptedModel([]), store).decide(
            "tr-buy", approve, by="carol", via="web"
        )
        assert not changed and again["status"] == "executed"
        assert again["decision"]["by"] == "bob"
    assert len(ledger(store)) == 1


def test_concurrent_approvals_run_the_trade_once(store: AnalystStore) -> None:
    Trader(ScriptedModel([trade("GOOGL", "buy", 28)]), store).propose("ma-buy", by="alice")
    outcomes: list[bool | str] = []
    barrier = threading.Barrier(4)

    def approve(name: str) -> None:
        barrier.wait()
        try:
            _, changed = Trader(ScriptedModel(["Bought."]), store).decide(
                "tr-buy", True, by=name, via="thread"
            )
        except RunLeased as exc:  # one of the others holds the trade right now
            outcomes.append(f"leased by {exc.holder}")
        else:
            outcomes.append(changed)

    threads = [threading.Thread(target=approve, args=(f"p{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # One approval ran the trade; each other one was refused: decided already, or held.
    assert len(outcomes) == 4 and outcomes.count(True) == 1
    assert all(o is False or str(o).startswith("leased by ") for o in outcomes if o is not True)
    assert len(ledger(store)) == 1


def test_deny_beats_a_persons_allow_when_the_limits_changed_while_it_waited(
    store: AnalystStore,
) -> None:
    Trader(ScriptedModel([trade("GOOGL", "buy", 28)]), store).propose("ma-buy", by="alice")
    store.profile.update(auto_approve_usd=1000, hard_limit_usd=2000)
    result, changed = Trader(ScriptedModel(["Not bought."]), store).decide(
        "tr-buy", True, by="bob", via="cli"
    )
    assert changed and result["status"] == "refused" and ledger(store) == []
    assert result["calls"][0]["reasons"] == [
        "at approval: 4,934.44 USD is over the hard limit of 2,000 USD"
    ]


def test_one_trade_per_proposal(store: AnalystStore) -> None:
    two = use_tools(
        ("execute_trade", {"ticker": "GOOGL", "side": "buy", "quantity": 1}),
        ("execute_trade", {"ticker": "GOOGL", "side": "buy", "quantity": 2}),
    )
    model = ScriptedModel([two, "Bought one lot."])
    result, _ = Trader(model, store).propose("ma-buy", by="alice")
    assert result["status"] == "executed"
    first, second = result["calls"]
    assert first["verdict"] == "auto" and second["verdict"] == "refused"
    assert "one trade per proposal" in second["reasons"][0]
    assert [e["quantity"] for e in ledger(store)] == [1]


def test_a_model_may_propose_a_smaller_trade_after_a_refusal(store: AnalystStore) -> None:
    model = ScriptedModel([trade("GOOGL", "buy", 100), trade("GOOGL", "buy", 3), "Bought 3."])
    result, _ = Trader(model, store).propose("ma-buy", by="alice")
    assert result["status"] == "executed"
    assert [c["verdict"] for c in result["calls"]] == ["refused", "auto"]
    assert [e["quantity"] for e in ledger(store)] == [3]


# -- the predicate and the policy, as the library sees them -----------------------------


def test_the_predicate_only_adds_asking_and_the_policy_only_denies() -> None:
    profile = Profile(holdings={"INTC": 10}, auto_approve_usd=100, hard_limit_usd=1000)
    guardian = Guardian(profile, tickers=["INTC"], recommendation="sell")
    tool = guardian.tool("tr-x", approver=None, ledger=Path("unused"))  # type: ignore[arg-type]
    small = {"ticker": "INTC", "side": "sell", "quantity": 2}  # 44.80 USD
    large = {"ticker": "INTC", "side": "sell", "quantity": 10}  # 224.00 USD
    assert not tool.needs_approval(small) and tool.needs_approval(large)
    assert tool.needs_approval({"ticker": "XYZ", "side": "sell", "quantity": 1})  # no price: ask
    assert tool.needs_approval({"ticker": "INTC"})  # invalid: ask
    assert guardian.policy(ToolCall("a", "execute_trade", small)) == "allow"
    over = {"ticker": "INTC", "side": "sell", "quantity": 11}  # more than held: deny, unasked
    assert guardian.policy(ToolCall("b", "execute_trade", over)) == "deny"
    assert guardian.policy(ToolCall("c", "get_stock_snapshot", {"ticker": "X"})) == "allow"


# -- proposals: which reports, how often ----------------------------------------------------


def test_only_a_published_buy_or_sell_report_leads_to_a_trade(store: AnalystStore) -> None:
    publish(store, "ma-hold", "hold", "MSFT")
    with pytest.raises(NotTradable, match="recommends hold"):
        Trader(ScriptedModel([]), store).propose("ma-hold", by="alice")
    pending(store, "ma-pending", "buy", "GOOGL")
    with pytest.raises(NotTradable, match="is pending"):
        Trader(ScriptedModel([]), store).propose("ma-pending", by="alice")
    with pytest.raises(ValueError, match="budget"):
        Trader(ScriptedModel([]), store).propose("ma-buy", by="alice", budget_usd=-1)
    assert store.trades.list() == []


def test_a_report_leads_to_one_proposal(store: AnalystStore) -> None:
    first, new = Trader(ScriptedModel([trade("GOOGL", "buy", 1), "Done."]), store).propose(
        "ma-buy", by="alice"
    )
    again, new_again = Trader(ScriptedModel([]), store).propose("ma-buy", by="bob")
    assert new and not new_again and again["trade_id"] == first["trade_id"]
    assert again["status"] == "executed" and len(ledger(store)) == 1


def test_a_failed_proposal_is_saved_and_may_be_proposed_again(store: AnalystStore) -> None:
    broken = ScriptedModel([RuntimeError("provider down")])
    with pytest.raises(Exception, match="provider down"):
        Trader(broken, store).propose("ma-buy", by="alice")
    failed = store.trades.get("tr-buy")
    assert failed["status"] == "failed" and "provider down" in failed["error"]
    retried, new = Trader(ScriptedModel([trade("GOOGL", "buy", 2), "Done."]), store).propose(
        "ma-buy", by="alice"
    )
    assert new and retried["status"] == "executed" and retried["retried"] == 1


def test_deciding_what_never_waited_or_does_not_exist_is_refused(store: AnalystStore) -> None:
    Trader(ScriptedModel([trade("GOOGL", "buy", 1), "Done."]), store).propose("ma-buy", by="alice")
    with pytest.raises(NotWaiting, match="tr-buy is executed"):
        Trader(ScriptedModel([]), store).decide("tr-buy", True, by="bob", via="cli")
    with pytest.raises(UnknownTrade, match="no trade with id 'tr-nope'"):
        Trader(ScriptedModel([]), store).decide("tr-nope", True, by="bob", via="cli")


# -- the ledger ------------------------------------------------------------------------------


def test_the_ledger_holds_one_trade_per_trade_id_across_threads(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    errors: list[str] = []

    def record() -> None:
        try:
            tools.record_trade("GOOGL", "buy", 1, trade_id="tr-1", approved_by="x", ledger=path)
        except ValueError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=record) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tools.ledger_entries(path)) == 1 and len(errors) == 5
    assert "already in the ledger" in errors[0] and "one trade per proposal" in errors[0]
    line = json.loads(path.read_text().splitlines()[0])
    assert line["note"] == "simulated trade; nothing was sent to a broker"


# -- the profile's limits ----------------------------------------------------------------------


def test_the_profile_limits_are_validated(tmp_path: Path) -> None:
    store = AnalystStore(tmp_path / "s", tmp_path / "r")
    assert store.profile.get().auto_approve_usd == 1000
    assert store.profile.get().hard_limit_usd == 10000
    assert store.profile.update(trade_tickers=["nvda", " msft", "NVDA"]).trade_tickers == [
        "NVDA",
        "MSFT",
    ]
    with pytest.raises(pydantic.ValidationError, match="is above hard_limit_usd"):
        store.profile.update(auto_approve_usd=5000, hard_limit_usd=100)
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 0"):
        store.profile.update(hard_limit_usd=-1)
    with pytest.raises(pydantic.ValidationError, match="not a ticker symbol"):
        store.profile.update(trade_tickers=["NV DA"])
    assert store.profile.get().trade_tickers == ["NVDA", "MSFT"]  # nothing changed
