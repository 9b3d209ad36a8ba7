"""The Market Analyst example end to end, offline: route, research, write, evaluate, approve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _analyst_app import make_app
from market_analyst.archive import SQLiteArchive
from market_analyst.demo_model import DemoModel
from market_analyst.facts import numbers
from market_analyst.report import AnalystReport
from market_analyst.roles import role_of
from market_analyst.store import AnalystStore
from market_analyst.workflow import Analyst

from agentloops import ModelError, ModelRequest, ModelResponse
from agentloops.testing import FunctionModel, respond, respond_structured

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SNAPSHOT_TOOLS = {"get_stock_snapshot", "get_price_history", "search_news"}
RESEARCH_TOOLS = SNAPSHOT_TOOLS | {"get_financials", "search_competitors"}

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return make_app(tmp_path, monkeypatch)


def test_no_key_and_no_base_url_uses_the_announced_offline_model(app, capsys) -> None:
    assert app("Quick snapshot of NVDA") == 0
    out = capsys.readouterr().out
    assert "deterministic stand-in" in out and "ANTHROPIC_API_KEY" in out and "--base-url" in out
    record = app.only_run()
    assert "offline-demo" in record["model"] and record["settings"]["provider"] == "offline"


def test_quick_snapshot_takes_the_rewoo_route_and_waits_for_approval(app, capsys) -> None:
    assert app("Quick snapshot of NVDA") == 0
    record = app.only_run()
    assert record["route"] == "flash_briefing" and record["status"] == "pending"
    calls = [(e["name"], e["args"]["ticker"], e["is_error"]) for e in record["evidence"]]
    assert sorted(calls) == sorted((name, "NVDA", False) for name in SNAPSHOT_TOOLS)
    assert record["verdict"]["verdict"] == "pass"
    assert record["calls_by_role"] == {  # the solver's answer is the report: no writer
        "router": 1,
        "rewoo_planner": 1,
        "solver": 1,
        "evaluator": 1,
    }
    assert "157.99" in record["draft"]  # the fixture price, read by a tool
    assert app.reports() == []  # not a TTY and no --yes: nothing published
    out = capsys.readouterr().out
    for seen in ("Route: flash_briefing", "ReWOO plan", "get_price_history", "Model usage"):
        assert seen in out
    assert f"--resume {record['run_id']} --approve" in out


def test_investment_thesis_takes_plan_and_execute_with_replanning_and_yes_publishes(
    app, capsys
) -> None:
    assert app("Investment thesis and strategic risks for MSFT", "--yes") == 0
    record = app.only_run()
    assert record["route"] == "deep_research" and record["status"] == "published"
    assert {e["name"] for e in record["evidence"]} == RESEARCH_TOOLS
    assert not any(e["is_error"] for e in record["evidence"])
    assert record["verdict"]["verdict"] == "pass"
    roles = record["calls_by_role"]
    assert roles["planner"] == 1 and roles["reporter"] == 1 and roles["executor"] == 8
    assert roles["replanner"] == 3  # re-planning is on: asked before each step after the first
    assert "writer" not in roles  # the reporter's answer is the report
    assert "### Risks" in record["draft"] and "**Recommendation: BUY**" in record["draft"]
    [report] = app.reports()
    assert report.name == f"{record['run_id']}.md"
    text = report.read_text()
    assert record["draft"].strip() in text and "NOT live market data" in text
    assert "Plan-and-Execute plan" in capsys.readouterr().out


def test_the_draft_is_a_structured_record_whose_figures_cite_their_tool_outputs(app) -> None:
    assert app("Investment thesis and strategic risks for MSFT") == 0
    record = app.only_run()
    report = AnalystReport.model_validate(record["draft_record"])
    assert report.recommendation in ("buy", "hold", "sell") and report.tickers == ["MSFT"]
    assert report.key_figures and record["figure_problems"] == []
    for figure in report.key_figures:  # deep research cites its steps: S2 is S2.1, S2.2, ...
        cited = [e for e in record["evidence"] if e["id"].split(".")[0] == figure.source]
        assert any(numbers(figure.value) <= numbers(e["content"]) for e in cited), figure
        assert f"| {figure.source} (" in record["draft"]  # the rendered table names the source
    assert {f.source for f in report.key_figures} == {"S1", "S2"}


def test_unknown_ticker_is_a_tool_error_and_never_an_invented_number(app) -> None:
    assert app("Quick snapshot of XYZ", "--yes") == 0
    record = app.only_run()
    assert record["evidence"] and all(e["is_error"] for e in record["evidence"])
    assert "unknown ticker 'XYZ'" in record["evidence"][0]["content"]
    assert record["verdict"]["verdict"] in ("fail", "needs_human")
    assert numbers(record["draft"]) == set()
    assert record["draft_record"]["confidence"] == "low"
    assert record["status"] == "pending" and app.reports() == []  # --yes needs a pass


def test_deep_research_on_an_unknown_ticker_replans_away_the_steps_that_would_fail(app) -> None:
    assert app("Investment thesis and strategic risks for XYZ") == 0
    record = app.only_run()
    assert record["calls_by_role"]["replanner"] == 1  # it revised after step 1, then no more
    assert record["calls_by_role"]["executor"] == 2  # only step 1 ran
    assert {e["name"] for e in record["evidence"]} == {"get_stock_snapshot", "get_price_history"}
    assert record["verdict"]["verdict"] == "needs_human"


def _tampered(role: str, change) -> FunctionModel:
    """The demo model, with the answer of one role changed by `change(response)`."""
    demo = DemoModel()

    def model(request: ModelRequest) -> ModelResponse:
        response = demo.complete(request)
        return change(response) if role_of(request) == role else response

    return FunctionModel(model)


def test_a_miscited_figure_goes_back_to_the_model_which_fixes_it(app) -> None:
    fixed: list[int] = []

    def miscite_once(response: ModelResponse) -> ModelResponse:
        if fixed:  # the second answer, after the figure check sent the first back
            return response
        fixed.append(1)
        return _miscited(response)

    assert app("Quick snapshot of AMD", "--yes", model=_tampered("solver", miscite_once)) == 0
    record = app.only_run()
    assert record["calls_by_role"]["solver"] == 2  # one answer sent back, one accepted
    assert record["figure_problems"] == [] and record["verdict"]["verdict"] == "pass"
    research = app.store.runs.read(f"{record['run_id']}/research")
    checks = [r.data for r in research if r.kind == "output_checked"]
    assert "is not in E3 (search_news)" in checks[0]["retry"] and "value" in checks[1]


def _miscited(response: ModelResponse) -> ModelResponse:
    report = dict(response.output)  # type: ignore[arg-type]
    first = dict(report["key_figures"][0], source="E3")  # the price, cited to the news
    return respond_structured({**report, "key_figures": [first, *report["key_figures"][1:]]})


def test_a_figure_still_miscited_after_the_retries_fails_the_gate(app) -> None:
    model = _tampered("solver", _miscited)
    assert app("Quick snapshot of AMD", "--yes", model=model) == 0
    record = app.only_run()
    assert record["calls_by_role"]["solver"] == 3  # FIGURE_RETRIES=2, then the last kept
    assert record["verdict"]["verdict"] == "fail" and record["status"] == "pending"
    assert "figure check" in record["verdict"]["reasons"][0]
    assert "is not in E3 (search_news)" in record["figure_problems"][0]


def test_key_figures_written_as_json_numbers_are_taken_as_written(app) -> None:
    def as_numbers(response: ModelResponse) -> ModelResponse:
        report = dict(response.output)  # type: ignore[arg-type]
        figures = [dict(f, value=float(f["value"])) for f in report["key_figures"]]
        return respond_structured({**report, "key_figures": figures})

    assert app("Quick snapshot of AMD", model=_tampered("solver", as_numbers)) == 0
    record = app.only_run()
    assert record["calls_by_role"]["solver"] == 1  # accepted first time, not re-asked
    assert record["figure_problems"] == [] and record["verdict"]["verdict"] == "pass"


def test_the_evaluator_fails_a_draft_with_an_invented_figure(app) -> None:
    def invent(response: ModelResponse) -> ModelResponse:
        report = dict(response.output)  # type: ignore[arg-type]
        return respond_structured({**report, "thesis": report["thesis"] + " Target 999.99."})

    assert app("Quick snapshot of AMD", "--yes", model=_tampered("solver", invent)) == 0
    record = app.only_run()
    assert record["figure_problems"] == []  # the key figures are fine; the thesis is not
    assert record["verdict"]["verdict"] == "fail" and "999.99" in record["verdict"]["reasons"][0]
    assert record["status"] == "pending"  # --yes approves only a passing draft


def test_resume_from_another_process_publishes_exactly_once(app) -> None:
    assert app("Quick snapshot of NVDA") == 0
    run_id = app.only_run()["run_id"]

    def resume() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(EXAMPLES / "market_analyst.py"), "--resume", run_id]
        env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
        return subprocess.run(
            [*command, "--approve"], cwd=app.root, capture_output=True, text=True, env=env
        )

    first = resume()
    assert first.returncode == 0, first.stderr
    [report] = app.reports()
    published = report.read_text()
    second = resume()
    assert second.returncode == 0 and "already published" in second.stdout
    assert app.reports() == [report] and report.read_text() == published
    assert app.store.get(run_id)["status"] == "published"


def test_reject_publishes_nothing_and_is_final(app, capsys) -> None:
    assert app("Quick snapshot of META") == 0
    run_id = app.only_run()["run_id"]
    assert app("--resume", run_id, "--reject") == 0
    assert "rejected for good" in capsys.readouterr().out
    assert app("--resume", run_id, "--approve") == 0  # already decided: no change
    assert app.store.get(run_id)["status"] == "rejected" and app.reports() == []


def test_the_first_decision_wins_even_from_a_second_store(app, tmp_path: Path) -> None:
    assert app("Quick snapshot of META") == 0
    run_id = app.only_run()["run_id"]
    other = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")  # another process's view
    _, changed = other.decide(run_id, False, by="bob", via="test")
    record, again = app.store.decide(run_id, True, by="alice", via="test")
    assert changed and not again
    assert record["status"] == "rejected" and record["decision"]["by"] == "bob"
    assert app.store.archive.get(run_id) is None and app.reports() == []


class Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing handles it)."""


def test_a_decision_recorded_but_not_published_is_published_by_the_next_attempt(
    app, monkeypatch
) -> None:
    assert app("Quick snapshot of META") == 0
    run_id = app.only_run()["run_id"]

    def dies(self: SQLiteArchive, report: object) -> bool:
        raise Crash

    with monkeypatch.context() as patch, pytest.raises(Crash):
        patch.setattr(SQLiteArchive, "add", dies)  # the process dies right after deciding
        app.store.decide(run_id, True, by="carol", via="--approve")
    record = app.store.get(run_id)
    assert record["status"] == "pending" and record["decision"]["by"] == "carol"
    assert app.reports() == [] and app.store.archive.get(run_id) is None
    assert app("--resume", run_id, "--reject") == 0  # too late: the approval stands
    record = app.store.get(run_id)
    assert record["status"] == "published" and record["decision"]["by"] == "carol"
    [report] = app.reports()
    assert "Approved by carol" in report.read_text()
    assert app.store.archive.get(run_id).markdown == report.read_text()  # type: ignore[union-attr]
    kinds = [r.kind for r in app.store.runs.read(run_id)]
    assert kinds.count("decision") == 1 and kinds.count("published") == 1


def test_a_wrong_resume_id_lists_the_pending_runs(app, capsys) -> None:
    assert app("Quick snapshot of AAPL") == 0
    run_id = app.only_run()["run_id"]
    capsys.readouterr()
    assert app("--resume", "ma-nope", "--approve") == 2
    out = capsys.readouterr().out
    assert "no run with id 'ma-nope'" in out and run_id in out


class FailingOnce:
    """The demo model, but the executor's call number `at` raises like an API outage."""

    def __init__(self, at: int):
        self.model, self.at, self.executor_calls = DemoModel(), at, 0

    def complete(self, request: ModelRequest) -> ModelResponse:
        if role_of(request) == "executor":
            self.executor_calls += 1
            if self.executor_calls == self.at:
                raise ModelError("overloaded (simulated)", status=529)
        return self.model.complete(request)


def test_an_api_error_mid_run_keeps_the_checkpoint_and_resume_continues(app, capsys) -> None:
    task = "Investment thesis and strategic risks for MSFT"
    assert app(task, model=FailingOnce(at=5)) == 1  # step 3's first executor call
    record = app.only_run()
    out = capsys.readouterr().out
    assert "overloaded" in out and f"--resume {record['run_id']}" in out
    assert record["status"] == "running" and "ModelError" in record["error"]
    done_before = [e["name"] for e in record["evidence"]]
    assert sorted(done_before) == ["get_financials", "get_price_history", "get_stock_snapshot"]
    assert app("--list") == 0
    assert f"Stopped part-way (resumable): {record['run_id']}" in capsys.readouterr().out
    assert app("--resume", record["run_id"], "--offline", "--approve") == 0
    assert "decide after reading the draft" in capsys.readouterr().out
    record = app.store.get(record["run_id"])
    assert record["status"] == "pending" and record["verdict"]["verdict"] == "pass"
    assert app.reports() == []  # an approval given before the draft existed is not one
    names = [e["name"] for e in record["evidence"]]
    assert sorted(names) == sorted(RESEARCH_TOOLS)  # steps 1 and 2 were not run again
    # Over both processes, each model call was made once: the resumed research replayed
    # the planner and the first four executor calls from its journal.
    roles = record["calls_by_role"]
    assert (roles["planner"], roles["executor"], roles["replanner"]) == (1, 8, 3)
    research = app.store.runs.read(f"{record['run_id']}/research")
    assert sum(r.kind == "model" for r in research) == 13  # planner, 8, 3, reporter
    assert [r.kind for r in research].count("failed") == 1


def test_planner_and_executor_can_be_separate_models(tmp_path: Path) -> None:
    store = AnalystStore(tmp_path / "state", tmp_path / "reports")
    seen: dict[str, set[str]] = {"main": set(), "planner": set(), "executor": set()}

    def client(name: str) -> FunctionModel:
        demo = DemoModel()

        def answer(request: ModelRequest) -> ModelResponse:
            seen[name].add(role_of(request))
            return demo.complete(request)

        return FunctionModel(answer)

    analyst = Analyst(client("main"), store, planner=client("planner"), executor=client("executor"))
    analyst.run("Investment thesis and strategic risks for NVDA", "r1")
    assert seen["planner"] == {"planner", "replanner"}
    assert seen["executor"] == {"executor"}
    assert seen["main"] == {"router", "reporter", "evaluator"}
    analyst.run("Quick snapshot of NVDA", "r2")
    assert "rewoo_planner" in seen["planner"] and "solver" in seen["main"]


def test_research_that_never_fills_the_report_stops_the_run_resumably(app, capsys) -> None:
    def prose(response: ModelResponse) -> ModelResponse:
        return respond("Here is my report, in prose.")

    assert app("Quick snapshot of NVDA", model=_tampered("solver", prose)) == 1
    record = app.only_run()
    assert record["status"] == "running" and "InvalidOutput" in record["error"]
    assert "max_output_retries=2" in record["error"]  # the last problem is named
    assert record["calls_by_role"]["solver"] == 3 and "draft" not in record
    assert app("--resume", record["run_id"], "--offline") == 0  # a new research run
    record = app.store.get(record["run_id"])
    assert record["status"] == "pending" and record["research_attempts"] == 1
    assert record["calls_by_role"]["rewoo_planner"] == 2


@pytest.mark.parametrize(
    ("request_text", "mode", "message"),
    [(" \n ", "auto", "the request is empty"), ("Quick snapshot of NVDA", "fast", "mode must be")],
)
def test_the_analyst_refuses_a_blank_request_or_an_unknown_mode(
    tmp_path: Path, request_text: str, mode: str, message: str
) -> None:
    store = AnalystStore(tmp_path / "state", tmp_path / "reports")
    with pytest.raises(ValueError, match=message):
        Analyst(DemoModel(), store).run(request_text, "r1", mode=mode)
    assert store.run_ids() == []


def test_a_compactors_summary_call_is_counted_as_the_compactor() -> None:
    from agentloops import Message, ModelRequest

    request = ModelRequest("You condense ...", [Message.user("turns")], role="compactor")
    assert role_of(request) == "compactor"
