"""The Market Analyst's long-term memory (the investor profile, the last report on a ticker)
and its archive of published reports (list, show, full-text search)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _analyst_app import make_app
from market_analyst.archive import ArchivedReport, SQLiteArchive, fts_query
from market_analyst.demo_model import DemoModel
from market_analyst.memory import Profile, ProfileStore, parse_holdings
from market_analyst.roles import role_of

from agentloops import ModelRequest, ModelResponse
from agentloops.testing import FunctionModel

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")
THESIS = "Investment thesis and strategic risks for MSFT"


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return make_app(tmp_path, monkeypatch)


class Recording(FunctionModel):
    """The demo model, keeping every request by role."""

    def __init__(self) -> None:
        self.by_role: dict[str, list[ModelRequest]] = {}
        demo = DemoModel()

        def answer(request: ModelRequest) -> ModelResponse:
            self.by_role.setdefault(role_of(request), []).append(request)
            return demo.complete(request)

        super().__init__(answer)

    def prompt(self, role: str) -> str:
        request = self.by_role[role][0]
        return request.system + "\n" + request.messages[0].text


# -- the profile -----------------------------------------------------------------------


def test_the_profile_is_set_and_shown_from_the_command_line(app, capsys) -> None:
    assert app("--profile") == 0
    assert "medium" in capsys.readouterr().out  # the defaults before anything is set
    argv = ["--risk-tolerance", "low", "--horizon", "long", "--holdings", "NVDA=10, msft=2.5"]
    assert app(*argv, "--preferences", "no tobacco") == 0
    out = capsys.readouterr().out
    assert "(saved)" in out and "NVDA 10, MSFT 2.5" in out and "no tobacco" in out
    assert app.store.profile.get() == Profile(
        risk_tolerance="low",
        horizon="long",
        holdings={"NVDA": 10, "MSFT": 2.5},
        preferences="no tobacco",
    )
    assert app("--holdings", "") == 0  # clears the holdings, keeps the rest
    assert app.store.profile.get().holdings == {} and app.store.profile.get().horizon == "long"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--holdings", "NVDA=ten"], "'ten' is not a number"),
        (["--holdings", "NVDA"], "TICKER=SHARES"),
        (["--holdings", "NVDA=-3"], "shares must be more than 0"),
        (["--holdings", "N4DA=3"], "is not a ticker symbol"),
    ],
)
def test_a_bad_profile_value_changes_nothing(app, capsys, argv: list[str], said: str) -> None:
    assert app(*argv) == 2
    assert said in capsys.readouterr().out
    assert app.store.profile.get() == Profile()


def test_the_profile_lives_in_the_same_database_as_the_runs(app) -> None:
    assert app("--risk-tolerance", "high") == 0
    assert app("Quick snapshot of NVDA") == 0
    with sqlite3.connect(app.store.db_path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    # The run store's tables and the example's own, in one file; the old layout's are gone.
    assert {"agentloops_runs", "agentloops_journal", "profile", "reports", "reports_fts"} <= tables
    assert not tables & {"runs", "decisions", "trades", "trade_decisions"}


def test_the_profile_reaches_the_planner_and_the_reporter(app) -> None:
    assert app("--risk-tolerance", "low", "--horizon", "long", "--holdings", "MSFT=4") == 0
    model = Recording()
    assert app(THESIS, model=model) == 0
    for role in ("planner", "reporter"):  # the reporter's answer is the report
        assert "Risk tolerance: low. Horizon: long. Holdings: MSFT 4 shares." in model.prompt(role)
    record = app.only_run()
    days = {e["args"]["days"] for e in record["evidence"] if e["name"] == "get_price_history"}
    assert days == {252}  # a long horizon: the planner asked for a year of prices
    draft = record["draft_record"]
    assert draft["recommendation"] == "hold"  # a buy case, held back by a low risk tolerance
    assert "You already hold MSFT" in draft["thesis"]
    assert record["verdict"]["verdict"] == "pass"


def test_a_flash_plan_follows_the_horizon_too(app) -> None:
    assert app("--horizon", "long") == 0
    assert app("Quick snapshot of NVDA") == 0
    history = [e for e in app.only_run()["evidence"] if e["name"] == "get_price_history"]
    assert [e["args"]["days"] for e in history] == [252]


def test_a_new_report_sees_the_last_one_on_the_same_ticker_and_says_what_changed(app) -> None:
    assert app(THESIS, "--yes") == 0
    first = app.only_run()
    assert first["draft_record"]["what_changed"] == ""
    assert app("--risk-tolerance", "low") == 0
    model = Recording()
    assert app("Tell me about msft", model=model) == 0
    [second] = [app.store.get(r) for r in app.store.run_ids() if r != first["run_id"]]
    date = first["decision"]["at"][:10]
    for role in ("planner", "reporter"):
        assert f"report {first['run_id']} published {date}, recommended buy" in model.prompt(role)
    changed = second["draft_record"]["what_changed"]
    assert changed == f"The last report ({date}) recommended buy; this one recommends hold."
    assert "Since the last report" in second["draft"]
    assert second["verdict"]["verdict"] == "pass"  # the date is in the evidence (memory)


def test_no_last_report_block_for_a_ticker_never_published(app) -> None:
    assert app(THESIS, "--yes") == 0
    model = Recording()
    assert app("Investment thesis for NVDA", model=model) == 0
    assert "<last_report>" not in model.prompt("planner")


def test_parse_holdings() -> None:
    assert parse_holdings("NVDA=10, AAPL = 1.5,") == {"NVDA": 10.0, "AAPL": 1.5}
    assert parse_holdings("  ") == {}


def test_profile_store_defaults_and_validates(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path / "x.db")
    assert store.get() == Profile()
    with pytest.raises(ValueError, match="risk_tolerance"):
        store.update(risk_tolerance="reckless")
    assert store.update(horizon="short").horizon == "short"
    assert ProfileStore(tmp_path / "x.db").get().horizon == "short"  # reopened: still there


# -- the archive -----------------------------------------------------------------------


def test_reports_are_listed_shown_and_searched(app, capsys) -> None:
    assert app("--reports") == 0
    assert "No published reports yet" in capsys.readouterr().out
    assert app(THESIS, "--yes") == 0
    assert app("Quick snapshot of NVDA", "--yes") == 0
    msft, nvda = (app.store.archive.latest_for(t) for t in ("MSFT", "NVDA"))
    assert msft is not None and nvda is not None
    capsys.readouterr()
    assert app("--reports") == 0
    out = capsys.readouterr().out
    assert out.index(nvda.run_id) < out.index(msft.run_id)  # newest first
    assert app("--search", "cloud licensing") == 0
    out = capsys.readouterr().out
    assert msft.run_id in out and nvda.run_id not in out and "«licensing»" in out
    assert app("--search", "EXPORT rules") == 0
    assert nvda.run_id in capsys.readouterr().out
    assert app("--search", "nothing matches this") == 0
    assert "No published report matches" in capsys.readouterr().out
    assert app("--show", msft.run_id) == 0
    assert capsys.readouterr().out == msft.markdown


@pytest.mark.parametrize("query", ['"', "NEAR(", "AND OR NOT", "x*", "a:b", "(", "'; DROP"])
def test_search_never_reads_input_as_fts_syntax(tmp_path: Path, query: str) -> None:
    archive = SQLiteArchive(tmp_path / "a.db")
    archive.add(_report("r1", markdown="NEAR AND OR NOT x a b DROP"))
    archive.search(query)  # no sqlite3.OperationalError, whatever the input
    assert fts_query("") == ""


def test_show_prints_a_pending_draft_raw_for_editing(app, capsys, tmp_path: Path) -> None:
    assert app("Quick snapshot of NVDA") == 0
    record = app.only_run()
    capsys.readouterr()
    assert app("--show", record["run_id"]) == 0
    assert capsys.readouterr().out == record["draft"]
    assert app("--show", "ma-none") == 2


def _report(run_id: str, *, tickers=("NVDA",), published="2026-01-01T00:00:00+00:00", markdown="x"):
    return ArchivedReport(
        run_id=run_id,
        published=published,
        request="r",
        title=f"title {run_id}",
        tickers=tuple(tickers),
        recommendation="hold",
        decided_by="me",
        markdown=markdown,
    )


def test_archive_adds_once_and_finds_the_newest_report_per_ticker(tmp_path: Path) -> None:
    archive = SQLiteArchive(tmp_path / "a.db")
    assert archive.add(_report("r1", published="2026-01-01T00:00:00+00:00"))
    assert not archive.add(_report("r1", markdown="changed"))  # already archived: no change
    assert archive.get("r1").markdown == "x"  # type: ignore[union-attr]
    archive.add(_report("r2", tickers=("NVDA", "AMD"), published="2026-02-01T00:00:00+00:00"))
    assert archive.latest_for("nvda").run_id == "r2"  # type: ignore[union-attr]
    assert archive.latest_for("AMD").run_id == "r2"  # type: ignore[union-attr]
    assert archive.latest_for("MSFT") is None and archive.get("r9") is None
    assert [r.run_id for r in archive.recent()] == ["r2", "r1"]
    assert {h.run_id for h in archive.search("x")} == {"r1", "r2"}
    archive.add(_report("r3", markdown="a long report that names licensing once, and more words"))
    archive.add(_report("r4", markdown="licensing licensing review"))
    assert [h.run_id for h in archive.search("licensing")] == ["r4", "r3"]  # best match first
