"""The Market Analyst's trades end to end on the offline stand-in: proposed from the command
line and the web app after a published report, decided once across both; and the live
data switch (`--live`), tested with the network-free default and a fake yfinance."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from _analyst_app import answers, make_app
from market_analyst import models, tools
from market_analyst.demo_model import DemoModel
from market_analyst.live import LiveSource
from market_analyst.roles import role_of
from market_analyst.sources import FixtureSource, live_source
from market_analyst.store import AnalystStore
from market_analyst.web.app import create_app
from starlette.testclient import TestClient

from agentloops import ModelError, ModelRequest, ModelResponse
from agentloops.testing import FunctionModel

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")

BUY = "Quick snapshot of GOOGL"  # the stand-in recommends buy (fixture price 176.23)
SELL = "Quick snapshot of INTC"  # ... sell (22.40)
HOLD = "Quick snapshot of AAPL"  # ... hold


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return make_app(tmp_path, monkeypatch)


def ledger(app: Any) -> list[dict[str, Any]]:
    return tools.ledger_entries(app.store.ledger_path)


def only_trade(app: Any) -> dict[str, Any]:
    [trade] = app.store.trades.list()
    return trade


# -- the command line ---------------------------------------------------------------------


def test_yes_and_trade_buy_within_the_limit_at_once(app, capsys) -> None:
    assert app(BUY, "--yes", "--trade") == 0
    out = capsys.readouterr().out
    trade = only_trade(app)
    assert trade["status"] == "executed" and "Trade tr-" in out and "executed" in out
    [entry] = ledger(app)
    # The stand-in sizes a buy to the profile's unasked limit: 5 x 176.23 <= 1,000 USD.
    assert (entry["ticker"], entry["quantity"], entry["approved_by"]) == ("GOOGL", 5, "guardian")


def test_a_large_trade_waits_then_is_approved_once_from_another_command(app, capsys) -> None:
    assert app(BUY, "--yes", "--trade", "--budget", "5000") == 0
    trade = only_trade(app)
    out = capsys.readouterr().out
    assert trade["status"] == "waiting" and ledger(app) == []
    assert f"--approve-trade {trade['trade_id']}" in out
    assert app("--trades") == 0 and "waiting" in capsys.readouterr().out
    assert app("--approve-trade", trade["trade_id"], "--by", "bob") == 0
    assert "executed" in capsys.readouterr().out
    [entry] = ledger(app)
    assert (entry["quantity"], entry["approved_by"], entry["via"]) == (28, "bob", "--approve-trade")
    assert app("--deny-trade", trade["trade_id"], "--by", "carol") == 1
    said = " ".join(capsys.readouterr().out.split())
    assert "already decided by bob" in said and "Your denial was refused" in said
    assert len(ledger(app)) == 1


def test_over_the_hard_limit_is_refused_with_the_reason(app, capsys) -> None:
    assert app(BUY, "--yes", "--trade", "--budget", "50000") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert only_trade(app)["status"] == "refused" and ledger(app) == []
    assert "over the hard limit of 10,000 USD" in out


def test_the_prompt_offers_a_trade_after_publishing_and_a_person_denies_it(app) -> None:
    app("--holdings", "INTC=100")  # the stand-in sells all: 2,240 USD, above 1,000
    ask = answers("y", "y", "n")  # publish; propose a trade; deny it
    assert app(SELL, ask=ask) == 0
    assert "recommends sell INTC" in ask.asked[1]  # type: ignore[attr-defined]
    assert "Propose a simulated trade?" in ask.asked[1]  # type: ignore[attr-defined]
    assert "Run trade tr-" in ask.asked[2]  # type: ignore[attr-defined]
    trade = only_trade(app)
    assert trade["status"] == "denied" and trade["decision"]["via"] == "prompt"
    assert ledger(app) == []


def test_a_waiting_sell_is_approved_at_the_prompt(app) -> None:
    app("--holdings", "INTC=100", "--by", "dora")
    assert app(SELL, "--by", "dora", ask=answers("y", "y", "y")) == 0
    [entry] = ledger(app)
    assert (entry["side"], entry["quantity"], entry["value_usd"]) == ("sell", 100, 2240.0)
    assert (entry["approved_by"], entry["via"]) == ("dora", "prompt")


def test_selling_more_than_held_is_refused_at_the_prompt_flow(app, capsys) -> None:
    app("--holdings", "INTC=10")
    assert app(SELL, "--yes", "--trade", "--budget", "5000") == 0  # 223 shares' worth
    assert only_trade(app)["status"] == "refused" and ledger(app) == []
    assert "more than the 10 shares held" in " ".join(capsys.readouterr().out.split())


def test_later_at_the_trade_prompt_leaves_it_waiting(app, capsys) -> None:
    app("--holdings", "INTC=100")
    assert app(SELL, ask=answers("y", "y", "l")) == 0
    assert only_trade(app)["status"] == "waiting"
    assert "--deny-trade tr-" in capsys.readouterr().out


def test_no_trade_offer_for_a_hold_report_and_none_unless_asked(app, capsys) -> None:
    assert app(HOLD, "--yes", "--trade") == 0
    assert "recommends hold" in capsys.readouterr().out
    assert app(BUY, ask=answers("y", "n")) == 0  # published; no trade, thanks
    assert app.store.trades.list() == []
    assert app(BUY, "--yes") == 0  # no terminal: says how, proposes nothing
    assert "--trade [--budget USD]" in capsys.readouterr().out
    assert app.store.trades.list() == []


def test_resume_a_published_report_with_trade(app, capsys) -> None:
    assert app(BUY, "--yes") == 0
    [run_id] = [r for r in app.store.run_ids()]
    assert app("--resume", run_id, "--trade") == 0
    assert only_trade(app)["status"] == "executed"
    assert app("--resume", run_id, "--trade") == 0  # one proposal per report
    assert "already led to trade" in capsys.readouterr().out
    assert len(ledger(app)) == 1


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["x", "--budget", "10"], "--budget goes with --trade"),
        (["--trade"], "--trade needs a request"),
        (["x", "--trade", "--budget", "-5"], "must be 0 or more"),
        (["--approve-trade", "a", "--deny-trade", "a"], "not allowed with argument"),
    ],
)
def test_contradictory_trade_flags_are_refused(app, capsys, argv: list[str], said: str) -> None:
    with pytest.raises(SystemExit) as stop:
        app(*argv)
    assert stop.value.code == 2 and said in capsys.readouterr().err


def test_an_unknown_trade_is_named_with_those_waiting(app, capsys) -> None:
    assert app("--approve-trade", "tr-nope") == 2
    assert "no trade with id 'tr-nope'" in capsys.readouterr().out


def test_the_limits_are_set_from_the_command_line(app, capsys) -> None:
    code = app("--auto-approve-usd", "250", "--hard-limit-usd", "2000", "--trade-tickers", "nvda")
    assert code == 0
    profile = app.store.profile.get()
    assert (profile.auto_approve_usd, profile.hard_limit_usd) == (250, 2000)
    assert profile.trade_tickers == ["NVDA"]
    assert "up to 250.00 USD" in capsys.readouterr().out
    assert app("--auto-approve-usd", "5000") == 2  # above the hard limit
    assert "is above hard_limit_usd" in " ".join(capsys.readouterr().out.split())


# -- the web app ----------------------------------------------------------------------------


@pytest.fixture
def web(tmp_path: Path):
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    clients = models.build(models.ModelSettings(provider="offline"))
    with TestClient(create_app(store, clients, user="tester"), base_url="http://127.0.0.1") as c:
        yield c, store


def _published(client: TestClient, request: str) -> str:
    run_id: str = client.post("/api/runs", json={"request": request}).json()["run_id"]
    client.get(f"/api/runs/{run_id}/events")  # the feed ends when the run pauses
    assert client.post(f"/api/runs/{run_id}/decision", json={"action": "approve"}).is_success
    return run_id


def test_the_page_proposes_a_trade_after_publishing_and_decides_it_once(web) -> None:
    client, store = web
    run_id = _published(client, BUY)
    view = client.get(f"/api/runs/{run_id}").json()
    assert view["tradable"] and view["trade"] is None and view["recommendation"] == "buy"
    proposed = client.post(f"/api/runs/{run_id}/trade", json={"budget_usd": 5000, "by": "ann"})
    assert proposed.status_code == 200, proposed.text
    trade = proposed.json()["trade"]
    assert trade["status"] == "waiting" and "asks a person" in trade["summary"]
    assert "paused" not in trade  # the transcript stays on the server
    assert [t["trade_id"] for t in client.get("/api/trades").json()["waiting"]] == [
        trade["trade_id"]
    ]
    again = client.post(f"/api/runs/{run_id}/trade", json={"budget_usd": 1})
    assert again.status_code == 409 and "already led to trade" in again.json()["error"]
    url = f"/api/trades/{trade['trade_id']}/decision"
    first = client.post(url, json={"action": "approve", "by": "ann"})
    assert first.status_code == 200 and first.json()["trade"]["status"] == "executed"
    second = client.post(url, json={"action": "approve", "by": "bob"})
    assert second.status_code == 409
    assert "already decided by ann (web)" in second.json()["error"]
    assert "Your approval was refused" in second.json()["error"]
    [entry] = tools.ledger_entries(store.ledger_path)
    assert entry["approved_by"] == "ann" and entry["quantity"] == 28
    view = client.get(f"/api/runs/{run_id}").json()
    assert not view["tradable"] and view["trade"]["approved_by"] == "ann"


def test_the_page_denies_a_trade_and_the_ledger_stays_empty(web) -> None:
    client, store = web
    run_id = _published(client, BUY)
    trade = client.post(f"/api/runs/{run_id}/trade", json={"budget_usd": 3000}).json()["trade"]
    denied = client.post(f"/api/trades/{trade['trade_id']}/decision", json={"action": "deny"})
    assert denied.json()["trade"]["status"] == "denied"
    assert tools.ledger_entries(store.ledger_path) == []


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({"budget_usd": -1}, 400, "budget_usd must be a number"),
        ({"budget_usd": "lots"}, 400, "budget_usd must be a number"),
        ({"budget_usd": True}, 400, "budget_usd must be a number"),
    ],
)
def test_the_page_refuses_a_bad_budget(web, body: dict, status: int, said: str) -> None:
    client, store = web
    run_id = _published(client, BUY)
    response = client.post(f"/api/runs/{run_id}/trade", json=body)
    assert response.status_code == status and said in response.json()["error"]
    assert store.trades.list() == []


def test_the_page_refuses_trades_that_cannot_be(web) -> None:
    client, _ = web
    run_id = _published(client, HOLD)
    held = client.post(f"/api/runs/{run_id}/trade", json={})
    assert held.status_code == 409 and "recommends hold" in held.json()["error"]
    assert client.post("/api/runs/ma-nope/trade", json={}).status_code == 404
    assert (
        client.post("/api/trades/tr-nope/decision", json={"action": "approve"}).status_code == 404
    )
    bad = client.post("/api/trades/tr-nope/decision", json={"action": "maybe"})
    assert bad.status_code == 400 and "approve or deny" in bad.json()["error"]


def test_a_trade_proposal_the_model_fails_is_saved_and_may_be_proposed_again(tmp_path) -> None:
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    demo, outage = DemoModel(), {"on": True}

    def answer(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "trader" and outage["on"]:
            raise ModelError("the provider is down")
        return demo.complete(request)

    model = FunctionModel(answer)
    clients = models.Clients(model, model, model, models.ModelSettings(provider="custom"))
    with TestClient(create_app(store, clients), base_url="http://127.0.0.1") as client:
        run_id = _published(client, BUY)
        stopped = client.post(f"/api/runs/{run_id}/trade", json={})
        assert stopped.status_code == 502 and "the provider is down" in stopped.json()["error"]
        assert stopped.json()["trade"]["status"] == "failed"
        outage["on"] = False
        again = client.post(f"/api/runs/{run_id}/trade", json={})
        assert again.status_code == 200 and again.json()["trade"]["status"] == "executed"
    assert len(tools.ledger_entries(store.ledger_path)) == 1


def test_the_page_sets_the_trade_limits(web) -> None:
    client, store = web
    body = {"auto_approve_usd": 300, "hard_limit_usd": 900, "trade_tickers_text": "googl, msft"}
    saved = client.put("/api/profile", json=body)
    assert saved.status_code == 200 and saved.json()["trade_tickers_text"] == "GOOGL, MSFT"
    assert store.profile.get().hard_limit_usd == 900
    wrong = client.put("/api/profile", json={"auto_approve_usd": 5000})
    assert wrong.status_code == 400 and "is above hard_limit_usd" in wrong.json()["error"]


# -- live data: the switch, never the network ---------------------------------------------------


def test_the_default_source_is_the_fixture_data() -> None:
    assert isinstance(tools.settings.source, FixtureSource)


def test_live_without_the_extra_names_it(app, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "yfinance", None)  # as if not installed
    assert app("--live", BUY, "--yes") == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "the 'live' extra" in out and "pip install 'agentloops-kit[live]'" in out
    assert app.store.run_ids() == []


class _Frame(dict):
    """Enough of a pandas DataFrame: frame["Close"].items() gives (date, close)."""


def fake_yfinance(quotes: dict[str, dict[str, Any]]) -> types.ModuleType:
    """A stand-in for the yfinance module: no network, fixed figures."""
    module = types.ModuleType("yfinance")

    class Ticker:
        def __init__(self, symbol: str):
            self.info = quotes.get(symbol, {})
            closes = {f"2026-01-{d:02d} 00:00:00-05:00": 100.0 + d for d in range(1, 31)}
            self._frame = _Frame(Close=closes if self.info else {})
            self.news = [
                {"content": {"title": f"{symbol} ships a chip", "pubDate": "2026-01-30T12:00Z"}},
                {"title": f"{symbol} old-style item", "providerPublishTime": 1767225600},
            ]

        def history(self, period: str) -> _Frame:
            assert period == "1y"
            return self._frame

    module.Ticker = Ticker  # type: ignore[attr-defined]
    return module


QUOTE = {
    "longName": "Fake Chips Inc.",
    "industry": "Semiconductors",
    "currentPrice": 130.0,
    "previousClose": 128.0,
    "marketCap": 3.2e12,
    "trailingEps": 2.6,
    "totalRevenue": 130.5e9,
    "netIncomeToCommon": 72.9e9,
    "freeCashflow": 60.7e9,
    "revenueGrowth": 0.69,
    "grossMargins": 0.75,
    "operatingMargins": 0.62,
    "profitMargins": 0.56,
    "totalCash": 43.2e9,
    "totalDebt": 10.3e9,
}


def test_live_source_answers_in_the_fixture_shapes_from_a_fake_yfinance() -> None:
    source = LiveSource(fake_yfinance({"FAKE": QUOTE}))
    snap = source.snapshot("fake")
    assert (snap["ticker"], snap["price"], snap["day_change_pct"]) == ("FAKE", 130.0, 1.56)
    assert (snap["pe_ratio"], snap["market_cap_b"], snap["week52_high"]) == (50.0, 3200.0, 130.0)
    assert set(snap) == set(FixtureSource().snapshot("NVDA"))
    window = source.history_window("FAKE", 5)
    assert window["days"] == 5 and window["end_date"] == "2026-01-30"
    news = source.news("FAKE", 4)["articles"]
    assert [a["date"] for a in news] == ["2026-01-30", "2026-01-01"]
    money = source.financials("FAKE")
    assert money["revenue_growth_pct"] == 69.0 and money["net_cash_b"] == 32.9
    with pytest.raises(ValueError, match="unknown ticker 'NOPE'"):
        source.check("NOPE")
    with pytest.raises(ValueError, match="no competitor data"):
        source.competitors("FAKE")
    with pytest.raises(ValueError, match=r"gave no cash_b, debt_b, eps, .*revenue_b"):
        LiveSource(fake_yfinance({"X": {"currentPrice": 1.0}})).financials("X")


def test_a_whole_run_and_a_trade_on_the_fake_live_source(app, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "yfinance", fake_yfinance({"NVDA": QUOTE}))
    assert type(live_source()).__name__ == "LiveSource"
    assert app("--live", "Quick snapshot of NVDA", "--yes") == 0
    record = app.only_run()
    assert record["status"] == "published"
    snapshot = next(e for e in record["evidence"] if e["name"] == "get_stock_snapshot")
    assert json.loads(snapshot["content"])["source"].startswith("Yahoo Finance via yfinance")
    report = Path(record["report_path"]).read_text()
    assert "Live market data from Yahoo Finance" in report
