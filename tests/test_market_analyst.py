"""The Market Analyst example end to end, offline: route, research, evaluate, approve."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from market_analyst import cli
from market_analyst.demo_model import DemoModel, role_of
from market_analyst.facts import numbers
from market_analyst.store import RunStore

from agentloops import ModelError, ModelRequest, ModelResponse
from agentloops.testing import FunctionModel, respond

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SNAPSHOT_TOOLS = {"get_stock_snapshot", "get_price_history", "search_news"}
RESEARCH_TOOLS = SNAPSHOT_TOOLS | {"get_financials", "search_competitors"}


pytestmark = pytest.mark.usefixtures("instant_analyst_tools")


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run the CLI in `tmp_path` (state and reports there), offline, tools instant."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at the terminal width

    def run(*argv: str, model=None) -> int:
        return cli.main([*argv, "--latency", "0"], model=model)

    run.store = RunStore(tmp_path / ".agentloops", tmp_path / "reports")  # type: ignore[attr-defined]
    return run


def only_run(store: RunStore) -> dict:
    [run_id] = store.records.list_runs()
    return store.get(run_id)


def reports(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "reports"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_no_key_and_no_base_url_uses_the_announced_offline_model(app, capsys) -> None:
    assert app("Quick snapshot of NVDA") == 0
    out = capsys.readouterr().out
    assert "deterministic stand-in" in out and "ANTHROPIC_API_KEY" in out and "--base-url" in out
    assert "offline-demo" in only_run(app.store)["model"]


def test_quick_snapshot_takes_the_rewoo_route_and_waits_for_approval(
    app, capsys, tmp_path: Path
) -> None:
    assert app("Quick snapshot of NVDA") == 0
    record = only_run(app.store)
    assert record["route"] == "flash_briefing" and record["status"] == "pending"
    calls = [(e["name"], e["args"]["ticker"], e["is_error"]) for e in record["evidence"]]
    assert sorted(calls) == sorted((name, "NVDA", False) for name in SNAPSHOT_TOOLS)
    assert record["verdict"]["verdict"] == "pass"
    assert record["calls_by_role"] == {"router": 1, "rewoo_planner": 1, "solver": 1, "evaluator": 1}
    assert "157.99" in record["draft"]  # the fixture price, read by a tool
    assert reports(tmp_path) == []  # not a TTY and no --yes: nothing published
    out = capsys.readouterr().out
    for seen in ("Route: flash_briefing", "ReWOO plan", "get_price_history", "Model usage"):
        assert seen in out
    assert f"--resume {record['run_id']} --approve" in out


def test_investment_thesis_takes_plan_and_execute_and_yes_publishes(
    app, capsys, tmp_path: Path
) -> None:
    assert app("Investment thesis and strategic risks for MSFT", "--yes") == 0
    record = only_run(app.store)
    assert record["route"] == "deep_research" and record["status"] == "published"
    assert {e["name"] for e in record["evidence"]} == RESEARCH_TOOLS
    assert not any(e["is_error"] for e in record["evidence"])
    assert record["verdict"]["verdict"] == "pass"
    roles = record["calls_by_role"]
    assert roles["planner"] == 1 and roles["reporter"] == 1 and roles["executor"] == 8
    assert "Strategic risks" in record["draft"]
    [report] = reports(tmp_path)
    assert report.name == f"{record['run_id']}.md"
    text = report.read_text()
    assert record["draft"].strip() in text and "NOT live market data" in text
    assert "Plan-and-Execute plan" in capsys.readouterr().out


def test_unknown_ticker_is_a_tool_error_and_never_an_invented_number(app, tmp_path) -> None:
    assert app("Quick snapshot of XYZ", "--yes") == 0
    record = only_run(app.store)
    assert record["evidence"] and all(e["is_error"] for e in record["evidence"])
    assert "unknown ticker 'XYZ'" in record["evidence"][0]["content"]
    assert record["verdict"]["verdict"] in ("fail", "needs_human")
    assert numbers(record["draft"]) == set()
    assert record["status"] == "pending" and reports(tmp_path) == []  # --yes needs a pass


def test_evaluator_fails_a_draft_with_an_invented_figure(app) -> None:
    demo = DemoModel()

    def inventive(request: ModelRequest) -> ModelResponse:
        response = demo.complete(request)
        if role_of(request) == "solver":
            return respond(response.message.text + "\n- The price may reach 999.99 USD.")
        return response

    assert app("Quick snapshot of AMD", "--yes", model=FunctionModel(inventive)) == 0
    record = only_run(app.store)
    assert record["verdict"]["verdict"] == "fail" and "999.99" in record["verdict"]["reasons"][0]
    assert record["status"] == "pending"  # --yes approves only a passing draft


def test_resume_from_another_process_publishes_exactly_once(app, tmp_path: Path) -> None:
    assert app("Quick snapshot of NVDA") == 0
    run_id = only_run(app.store)["run_id"]

    def resume() -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(EXAMPLES / "market_analyst.py"), "--resume", run_id]
        env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
        return subprocess.run(
            [*command, "--approve"], cwd=tmp_path, capture_output=True, text=True, env=env
        )

    first = resume()
    assert first.returncode == 0, first.stderr
    [report] = reports(tmp_path)
    published = report.read_text()
    second = resume()
    assert second.returncode == 0 and "already published" in second.stdout
    assert reports(tmp_path) == [report] and report.read_text() == published
    assert app.store.get(run_id)["status"] == "published"


def test_reject_publishes_nothing(app, tmp_path: Path) -> None:
    assert app("Quick snapshot of META") == 0
    run_id = only_run(app.store)["run_id"]
    assert app("--resume", run_id, "--reject") == 0
    assert app("--resume", run_id, "--approve") == 0  # already decided: no change
    assert app.store.get(run_id)["status"] == "rejected" and reports(tmp_path) == []


def test_a_wrong_resume_id_lists_the_pending_runs(app, capsys) -> None:
    assert app("Quick snapshot of AAPL") == 0
    run_id = only_run(app.store)["run_id"]
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


def test_an_api_error_mid_run_keeps_the_checkpoint_and_resume_continues(
    app, capsys, tmp_path: Path
) -> None:
    task = "Investment thesis and strategic risks for MSFT"
    assert app(task, model=FailingOnce(at=5)) == 1  # step 3's first executor call
    record = only_run(app.store)
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
    assert reports(tmp_path) == []  # an approval given before the draft existed is not one
    names = [e["name"] for e in record["evidence"]]
    assert sorted(names) == sorted(RESEARCH_TOOLS)  # steps 1 and 2 were not run again


@pytest.mark.parametrize(
    ("argv", "env", "expected", "described"),
    [
        (["x"], {"ANTHROPIC_API_KEY": "sk-test"}, "AnthropicModel", "Claude (claude-sonnet-5)"),
        (
            ["x", "--base-url", "http://localhost:11434/v1"],
            {},
            "OpenAICompatModel",
            "qwen3:8b at http://localhost:11434/v1",
        ),
        (["x", "--offline"], {"ANTHROPIC_API_KEY": "sk-test"}, "DemoModel", cli.MODEL_NAME),
        (["x"], {}, "DemoModel", cli.MODEL_NAME),
    ],
)
def test_model_choice(
    argv: list[str], env: dict, expected: str, described: str, monkeypatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    model, name, offline = cli.choose_model(cli.parse_args(argv))
    assert type(model).__name__ == expected and offline is (expected == "DemoModel")
    assert name == described
