"""The Market Analyst command line: hostile input, the approval prompt, edits, modes and
the model settings a run remembers."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
import respx
from _analyst_app import answers, child_env, make_app
from market_analyst import cli, flags, models
from market_analyst.approve import CHOICES
from market_analyst.demo_model import DemoModel
from market_analyst.roles import role_of
from market_analyst.store import RUNNING, AnalystStore, NoDraftYet

from agentloops import ModelRequest, ModelResponse
from agentloops.testing import FunctionModel, respond_structured

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")

HOSTILE = "[/] [link=http://evil.example]click me[/link] [bold red]"


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return make_app(tmp_path, monkeypatch)


# -- hostile input -----------------------------------------------------------------


def test_rich_markup_in_the_request_is_shown_as_typed_never_as_markup_or_a_link(
    app, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich would write a link's escape code
    assert app(f"Quick snapshot of NVDA {HOSTILE}", "--yes") == 0
    out = capsys.readouterr().out
    assert "\x1b]8;" not in out  # no terminal hyperlink anywhere
    assert "[link=http://evil.example]click me[/link]" in out
    assert app.only_run()["status"] == "published"


def test_rich_markup_in_a_model_chosen_ticker_cannot_break_the_run(app, capsys) -> None:
    demo = DemoModel()

    def planner(request: ModelRequest) -> ModelResponse:
        if role_of(request) != "rewoo_planner":
            return demo.complete(request)
        step = {
            "step_id": "#E1",
            "description": "snapshot",
            "tool_name": "get_stock_snapshot",
            "tool_args": {"ticker": f"NVDA{HOSTILE}"},
        }
        return respond_structured({"steps": [step]})

    assert app("Quick snapshot of NVDA", model=FunctionModel(planner)) == 0
    out = capsys.readouterr().out
    assert "[link=http://evil.example]" in out and "unknown ticker" in out
    record = app.only_run()
    assert record["status"] == "pending" and record["evidence"][0]["is_error"]


@pytest.mark.parametrize("request_text", ["   ", "", "\t\n"])
def test_a_blank_request_is_refused_with_a_message(app, capsys, request_text: str) -> None:
    with pytest.raises(SystemExit) as stop:
        app(request_text)
    assert stop.value.code == 2
    assert "the request is empty" in capsys.readouterr().err
    assert app.store.run_ids() == []


def test_a_lowercase_ticker_is_recognised(app) -> None:
    assert app("quick snapshot of nvda", "--yes") == 0
    record = app.only_run()
    assert {e["args"]["ticker"] for e in record["evidence"]} == {"NVDA"}
    assert record["status"] == "published"


@pytest.mark.parametrize(
    ("value", "message"),
    [("-1", "must be 0 or more"), ("nan", "must be 0 or more"), ("x", "not a number")],
)
def test_a_bad_latency_is_refused_by_argparse(capsys, value: str, message: str) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.parse_args(["Quick snapshot of NVDA", "--latency", value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--latency" in err and message in err and "Traceback" not in err


def test_the_request_is_never_written_raw_into_the_published_report(app) -> None:
    hostile = "NVDA snapshot <script>alert(1)</script>\n# Forged heading\n[x](http://evil)"
    assert app(hostile, "--yes") == 0
    [report] = app.reports()
    text = report.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert not any(line.startswith("# Forged") for line in text.splitlines())
    assert "](http://evil)" not in text.replace("\\](http://evil)", "")
    assert app.store.archive.get(app.only_run()["run_id"]).markdown == text


# -- the approval prompt -------------------------------------------------------------


@pytest.mark.parametrize(("stop", "code"), [(KeyboardInterrupt(), 130), (EOFError(), 0)])
def test_ctrl_c_or_ctrl_d_at_the_prompt_leaves_the_run_pending(
    app, capsys, stop: BaseException, code: int
) -> None:
    assert app("Quick snapshot of NVDA", ask=answers(stop)) == code
    out = capsys.readouterr().out
    record = app.only_run()
    assert record["status"] == "pending" and app.reports() == []
    assert f"Left {record['run_id']} pending" in out and "Traceback" not in out


def test_no_at_the_prompt_asks_to_confirm_a_rejection_for_good(app, capsys) -> None:
    ask = answers("n", "", "later")
    assert app("Quick snapshot of NVDA", ask=ask) == 0
    assert "for good" in ask.asked[0] and "for good" in ask.asked[1]  # type: ignore[attr-defined]
    assert app.only_run()["status"] == "pending"  # not confirmed: still pending
    run_id = app.only_run()["run_id"]
    assert app("--resume", run_id, ask=answers("n", "y")) == 0
    assert "rejected for good" in capsys.readouterr().out
    assert app.store.get(run_id)["status"] == "rejected"


def test_an_unknown_answer_asks_again_and_yes_publishes(app, capsys) -> None:
    ask = answers("maybe", "y")
    assert app("Quick snapshot of NVDA", ask=ask, model=None) == 0
    assert "Please answer y, e, n or l" in capsys.readouterr().out
    record = app.only_run()
    assert record["status"] == "published" and record["decision"]["via"] == "prompt"


def test_ctrl_c_during_the_run_stops_it_resumably_without_a_traceback(app, capsys) -> None:
    demo = DemoModel()

    def interrupted(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "solver":
            raise KeyboardInterrupt
        return demo.complete(request)

    assert app("Quick snapshot of NVDA", model=FunctionModel(interrupted)) == 130
    record = app.only_run()
    out = capsys.readouterr().out
    assert f"Interrupted. Everything finished so far is saved: {flags.command('--resume')}" in out
    assert record["status"] == RUNNING and record["error"].startswith("KeyboardInterrupt")
    assert app("--resume", record["run_id"], "--offline") == 0
    resumed = app.store.get(record["run_id"])
    assert resumed["status"] == "pending"
    assert resumed["calls_by_role"]["rewoo_planner"] == 1  # the plan came from the journal


def test_no_decision_before_the_draft_exists(app) -> None:
    app.store.create("ma-early", "Quick snapshot of NVDA")
    with pytest.raises(NoDraftYet, match="no draft to decide on yet"):
        app.store.decide("ma-early", True, by="me", via="test")
    assert app("--show", "ma-early") == 1


# -- edits ---------------------------------------------------------------------------


def _editor(tmp_path: Path, script: str) -> str:
    path = tmp_path / "editor.py"
    path.write_text(
        "import sys, pathlib\np = pathlib.Path(sys.argv[1])\ntext = p.read_text()\n" + script
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def test_approve_with_an_edited_file_keeps_the_original_the_edit_and_who(app, tmp_path) -> None:
    assert app("Quick snapshot of NVDA") == 0
    run_id = app.only_run()["run_id"]
    edited = tmp_path / "edited.md"
    edited.write_text("## My own words\n\nNVDA closed at 157.99 USD.\n")
    assert app("--resume", run_id, "--edited", str(edited), "--by", "alice") == 0
    record = app.store.get(run_id)
    assert record["status"] == "published" and "My own words" not in record["draft"]
    assert record["decision"]["edited"] == edited.read_text()
    assert record["decision"]["by"] == "alice" and record["decision"]["via"].startswith("--edited")
    [report] = app.reports()
    text = report.read_text()
    assert "My own words" in text and "edited by the approver" in text and "alice" in text
    assert record["draft"].strip() not in text


@pytest.mark.parametrize(("content", "said"), [("  \n", "is empty"), (None, "Cannot read")])
def test_an_empty_or_missing_edited_file_publishes_nothing(
    app, tmp_path, capsys, content: str | None, said: str
) -> None:
    assert app("Quick snapshot of NVDA") == 0
    run_id = app.only_run()["run_id"]
    if content is not None:
        (tmp_path / "edit.md").write_text(content)
    assert app("--resume", run_id, "--edited", str(tmp_path / "edit.md")) == 2
    assert said in capsys.readouterr().out
    assert app.store.get(run_id)["status"] == "pending"


def test_edit_in_the_editor_then_publish(app, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("EDITOR", _editor(tmp_path, "p.write_text(text + '\\nTarget 999.99.\\n')"))
    assert app("Quick snapshot of NVDA") == 0
    run_id = app.only_run()["run_id"]
    assert app("--resume", run_id, "--edit") == 0
    assert "no tool output holds: 999.99" in capsys.readouterr().out  # said, still published
    record = app.store.get(run_id)
    assert record["status"] == "published" and record["decision"]["via"] == "$EDITOR"
    assert record["decision"]["edited"].endswith("Target 999.99.\n")
    assert "Target 999.99." in app.reports()[0].read_text()


def test_edit_at_the_prompt(app, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VISUAL", _editor(tmp_path, "p.write_text('## Shorter\\n')"))
    assert app("Quick snapshot of NVDA", ask=answers("e")) == 0
    record = app.only_run()
    assert record["decision"]["edited"] == "## Shorter\n" and record["status"] == "published"


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("", "No changes made"),
        ("sys.exit(3)", "exited with status 3"),
        ("p.write_text('')", "is empty"),
        (None, "No editor"),
    ],
)
def test_an_edit_that_changes_nothing_leaves_the_run_pending(
    app, tmp_path, monkeypatch, capsys, script: str | None, said: str
) -> None:
    if script is not None:
        monkeypatch.setenv("EDITOR", _editor(tmp_path, script))
    assert app("Quick snapshot of NVDA") == 0
    run_id = app.only_run()["run_id"]
    assert app("--resume", run_id, "--edit") == 0
    assert said in capsys.readouterr().out
    assert app.store.get(run_id)["status"] == "pending" and app.reports() == []


# -- routing -------------------------------------------------------------------------


def test_an_unclear_request_goes_deep(app) -> None:
    assert app("Tell me about NVDA") == 0
    record = app.only_run()
    assert record["route"] == "deep_research" and "unclear" in record["route_reasoning"]


@pytest.mark.parametrize(
    ("mode", "request_text", "route"),
    [
        ("flash", "Investment thesis and strategic risks for MSFT", "flash_briefing"),
        ("deep", "Quick snapshot of NVDA", "deep_research"),
    ],
)
def test_mode_forces_the_route_without_asking_the_router(
    app, mode: str, request_text: str, route: str
) -> None:
    assert app(request_text, "--mode", mode) == 0
    record = app.only_run()
    assert record["route"] == route and f"--mode {mode}" in record["route_reasoning"]
    assert "router" not in record["calls_by_role"]


# -- models --------------------------------------------------------------------------

SERVER = "http://127.0.0.1:9/v1"


def test_a_run_remembers_its_model_and_the_resume_hint_is_complete(app, capsys) -> None:
    argv = [
        "--base-url",
        SERVER,
        "--model",
        "tiny",
        "--max-tokens",
        "300",
        "--structured",
        "prompt",
    ]
    with respx.mock(assert_all_called=True) as server:
        route = server.post(f"{SERVER}/chat/completions").mock(
            return_value=httpx.Response(401, json={"error": {"message": "bad key"}})
        )
        assert app("Quick snapshot of NVDA", *argv, "--state-dir", "my state") == 1
        out = capsys.readouterr().out
        store = cli.AnalystStore(app.root / "my state", app.root / "reports")
        [run_id] = store.run_ids()
        assert f"--resume {run_id} --state-dir 'my state'" in out
        assert "tiny at http://127.0.0.1:9/v1" in out
        settings = store.get(run_id)["settings"]
        assert settings["base_url"] == SERVER and settings["model"] == "tiny"
        assert settings["max_tokens"] == 300 and settings["structured"] == "prompt"
        # Resumed with no model flags: the same server, model and token limit, not offline.
        assert app("--resume", run_id, "--state-dir", "my state") == 1
        assert "deterministic stand-in" not in capsys.readouterr().out
        bodies = [json.loads(call.request.content) for call in route.calls]
    assert len(bodies) == 2
    assert all(b["model"] == "tiny" and b["max_tokens"] == 300 for b in bodies)


def test_a_claude_run_is_not_resumed_on_another_model_without_a_key(app, capsys) -> None:
    app.store.create("ma-claude", "Quick snapshot of NVDA", settings={"provider": "anthropic"})
    assert app("--resume", "ma-claude") == 2
    assert "set ANTHROPIC_API_KEY" in capsys.readouterr().out
    assert app.store.get("ma-claude")["status"] == RUNNING


def test_the_model_flags_reach_the_openai_compatible_client() -> None:
    flags = ["--structured", "prompt", "--max-tokens", "500"]
    roles = ["--planner-model", "p", "--executor-model", "e"]
    args = cli.parse_args(["x", "--base-url", SERVER, "--model", "m", *flags, *roles])
    clients = models.build(models.from_args(args))
    main, planner, executor = clients.main, clients.planner, clients.executor
    assert (main.model, planner.model, executor.model) == ("m", "p", "e")  # type: ignore[attr-defined]
    assert main.structured == "prompt" and main.max_tokens == 500  # type: ignore[attr-defined]
    assert clients.settings.describe() == f"m at {SERVER}; planner p, executor e"


def test_a_structured_mode_the_client_refuses_is_a_clear_error(app, capsys) -> None:
    assert app("x", "--base-url", SERVER, "--structured", "telepathy") == 2
    assert "Cannot start the model: structured must be" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "env", "provider", "described"),
    [
        (["x"], {"ANTHROPIC_API_KEY": "sk-test"}, "anthropic", "Claude (claude-sonnet-5)"),
        (["x", "--base-url", SERVER], {}, "openai_compat", f"qwen3:8b at {SERVER}"),
        (["x", "--offline"], {"ANTHROPIC_API_KEY": "sk-test"}, "offline", cli.models.MODEL_NAME),
        (["x"], {}, "offline", cli.models.MODEL_NAME),
    ],
)
def test_model_choice(argv, env: dict, provider: str, described: str, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clients = models.build(models.from_args(cli.parse_args(argv)))
    assert clients.settings.provider == provider and clients.settings.describe() == described


def test_model_flags_the_offline_model_cannot_use_are_named(app, capsys) -> None:
    assert app("Quick snapshot of NVDA", "--model", "big", "--planner-model", "p") == 0
    assert "Ignored with this model: --model, --planner-model" in capsys.readouterr().out


def test_claude_gets_the_token_limit_and_a_planner_of_its_own(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    args = cli.parse_args(["x", "--max-tokens", "800", "--planner-model", "claude-haiku-5"])
    clients = models.build(models.from_args(args))
    assert clients.main.max_tokens == 800  # type: ignore[attr-defined]
    assert clients.planner.model == "claude-haiku-5"  # type: ignore[attr-defined]
    assert clients.executor is clients.main


# -- the docs page ---------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "market-analyst.md"


def test_every_flag_the_docs_page_names_exists() -> None:
    parser_flags = set(re.findall(r"--[a-z][a-z-]+", flags.parser().format_help()))
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", DOCS.read_text(encoding="utf-8")))
    assert named and named <= parser_flags, named - parser_flags
    assert CHOICES in DOCS.read_text(encoding="utf-8")  # the prompt as the page shows it


def test_the_docs_page_code_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    page = DOCS.read_text(encoding="utf-8")
    [code] = re.findall(r"^```py\n(.*?)^```$", page, re.S | re.M)
    exec(compile(code, str(DOCS), "exec"), {"__name__": "docs"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "deep_research pass" and out[-1] == "ma-0001"


# -- what the demo prints ------------------------------------------------------------------


def _roles_said(out: str) -> tuple[Counter[str], Counter[str]]:
    """The roles of the live lines' model calls, and of the usage table's line by role."""
    live = Counter(re.findall(r"model call \((.+?)\) \d", out))
    [by_role] = re.findall(r"^by role: (.+)$", out, re.M)
    counted = Counter({name: int(n) for name, n in (p.rsplit(" ", 1) for p in by_role.split(", "))})
    return live, counted


@pytest.mark.parametrize("request_text", ["Quick snapshot of NVDA", "Tell me about MSFT"])
def test_the_live_lines_and_the_usage_table_name_each_role_alike(
    app, capsys, request_text: str
) -> None:
    assert app(request_text, "--yes") == 0
    live, counted = _roles_said(capsys.readouterr().out)
    assert live == counted, (live, counted)
    flash = {"router", "ReWOO planner", "ReWOO solver", "evaluator"}
    deep = {"router", "planner", "executor", "replanner", "reporter", "evaluator"}
    assert set(live) == (flash if "Quick" in request_text else deep)


def test_the_trade_part_has_a_heading_and_names_its_model_calls(app, capsys) -> None:
    assert app("Quick snapshot of GOOGL", "--yes", "--trade", "--budget", "5000") == 0
    out = capsys.readouterr().out
    run_id = app.only_run()["run_id"]
    heading = re.search(rf"^─+ Trade for {run_id} \(simulated\) ─+$", out, re.M)
    assert heading, out
    published = out.index(f"Published reports/{run_id}.md")
    first_call = out.index("model call (trader)")
    assert published < heading.start() < first_call
    [trade] = app.store.trades.list()
    assert app("--approve-trade", trade["trade_id"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^─+ Trade {trade['trade_id']}: approve ─+$", out, re.M), out
    assert "model call (trader)" in out


def _run_as_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(command),
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_printed_commands_work_as_printed(app, capsys, tmp_path: Path) -> None:
    demo = DemoModel()

    def interrupted(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "solver":
            raise KeyboardInterrupt
        return demo.complete(request)

    state = ["--state-dir", "my state"]
    assert app("Quick snapshot of NVDA", *state, model=FunctionModel(interrupted)) == 130
    [resume] = re.findall(
        r"Everything finished so far is saved: (.+)$", capsys.readouterr().out, re.M
    )
    done = _run_as_printed(resume, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Resuming run" in done.stdout

    assert app("Quick snapshot of GOOGL", "--yes", "--trade", "--budget", "5000", *state) == 0
    out = capsys.readouterr().out
    approve, deny = re.findall(r"^  (.+ --(?:approve|deny)-trade .+)$", out, re.M)
    done = _run_as_printed(approve, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    store = AnalystStore(tmp_path / "my state", tmp_path / "reports")
    [trade] = [t for t in store.trades.list() if t["status"] != "none"]
    assert trade["status"] == "executed"
    assert _run_as_printed(deny, tmp_path).returncode == 1  # already decided: refused


def test_the_printed_command_is_relative_from_the_repository_root(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    state = ["--state-dir", str(tmp_path / "state"), "--reports-dir", str(tmp_path / "reports")]
    script = root / "examples" / "market_analyst.py"
    argv = [sys.executable, str(script), "Quick snapshot of NVDA", "--offline", *state]
    first = _run_as_printed(shlex.join([*argv, "--latency", "0"]), root)
    assert first.returncode == 0, first.stderr
    [approve] = re.findall(r"^  (.+ --approve)$", first.stdout, re.M)
    interpreter, script_path = shlex.split(approve)[:2]
    assert Path(root, interpreter).resolve() == Path(sys.executable).resolve(), approve
    assert Path(root, script_path).resolve() == script
    if Path(sys.executable).is_relative_to(root):  # make test's .venv: a relative command
        assert not Path(interpreter).is_absolute() and script_path == "examples/market_analyst.py"
    done = _run_as_printed(approve, root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Published" in done.stdout
