"""`python -m agentloops`, end to end in subprocesses over SQLite and PostgreSQL: list, show,
decide (then resume in another process), follow a run driven elsewhere, delete; refusals
and their exit codes; tables with rich on a terminal."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentloops import ReActLoop, SQLiteStore, tool
from agentloops.cli import EXIT_CODES, main
from agentloops.cli.output import Output
from agentloops.journal import RunStore
from agentloops.testing import ScriptedModel, use_tools

ROOT = Path(__file__).resolve().parents[2]
LEDGER: list[tuple[str, dict[str, Any]]] = []


@tool(read_only=False, requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    LEDGER.append(("refund", {"order": order}))
    return f"refunded {order}"


@tool
def look(order: str) -> str:
    """Look an order up."""
    return f"{order}: 12 EUR"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, str]]:
    """A store and its URL, as an operator gives it to the command line."""
    LEDGER.clear()
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "runs.db") as store:
            yield store, f"sqlite:///{tmp_path / 'runs.db'}"
        return
    from psycopg.conninfo import conninfo_to_dict

    from agentloops import PostgresStore

    conninfo = request.getfixturevalue("postgres_conninfo")
    with PostgresStore(conninfo) as store:
        with store.connect(autocommit=True) as conn:
            conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
        p = conninfo_to_dict(conninfo)
        auth = p.get("user", "") + (f":{p['password']}" if p.get("password") else "")
        url = f"postgresql://{auth}@{p.get('host', '')}:{p.get('port', 5432)}/{p['dbname']}"
        yield store, url


def cli(url: str | None, *args: str, json_out: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTLOOPS_STORE"}
    if url is not None:
        env["AGENTLOOPS_STORE"] = url
    argv = [sys.executable, "-m", "agentloops", *args, *(["--json"] if json_out else [])]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def loop(store: RunStore, *replies: Any) -> ReActLoop:
    return ReActLoop(ScriptedModel(list(replies)), [look, refund], store=store)


def paused(store: RunStore, run_id: str = "r1") -> None:
    """A run paused on refund(A-1), its call id c1."""
    replies = [use_tools(("look", {"order": "A-1"})), use_tools(("refund", {"order": "A-1"}))]
    result = loop(store, *replies).run("Refund A-1.", run_id=run_id)
    assert result.stop_reason == "approval_required"
    assert [c.name for c in result.pending_approvals] == ["refund"]


def call_id(store: RunStore, run_id: str = "r1") -> str:
    [asked] = [r for r in store.read(run_id) if r.kind == "approval_requested"]
    return str(asked.data["calls"][0]["id"])


def test_list_show_decide_then_resume_in_another_process(store_url: Any) -> None:
    store, url = store_url
    paused(store)
    runs = json.loads(cli(url, "runs", "list", json_out=True).stdout)
    assert [(r["run_id"], r["kind"], r["status"]) for r in runs] == [("r1", "react", "paused")]
    assert json.loads(cli(url, "runs", "list", "--status", "finished", json_out=True).stdout) == []
    shown = cli(url, "runs", "show", "r1")
    assert shown.returncode == 0, shown.stderr
    cid = call_id(store)
    lines = shown.stdout.splitlines()
    assert "  status         paused" in lines
    assert any("approval_requested" in line and "refund" in line for line in lines)
    [row] = [line for line in lines if line.startswith(cid)]
    assert row.split()[1:3] == ["refund", '"order":'] and "--approve | --deny" in row

    decided = cli(url, "runs", "decide", "r1", cid, "--approve", "--by", "ann", "--reason", "ok")
    assert decided.returncode == 0, decided.stderr
    assert f'call {cid}: refund {{"order": "A-1"}}' in decided.stdout
    assert LEDGER == []  # the command line runs nothing
    info = store.run_info("r1")
    assert info.status == "paused" and not info.leased

    result = loop(store, "Refunded.").resume("r1")  # this process has the tools
    assert result.answer == "Refunded." and LEDGER == [("refund", {"order": "A-1"})]
    after = json.loads(cli(url, "runs", "show", "r1", json_out=True).stdout)
    assert after["run"]["status"] == "finished" and after["waiting"] == []
    [decision] = [r for r in after["records"] if r["kind"] == "decision"]
    assert "sum" in decision["data"]  # sealed into the run's checksum chain
    assert {k: v for k, v in decision["data"].items() if k != "sum"} == {
        "approved": True,
        "name": "refund",
        "args": {"order": "A-1"},
        "by": "ann",
        "reason": "ok",
    }


def test_a_wrong_kind_or_contradicting_decision_is_refused_with_its_exit_code(
    store_url: Any,
) -> None:
    store, url = store_url
    paused(store)
    cid = call_id(store)
    wrong = cli(url, "runs", "decide", "r1", cid, "--rerun", "--by", "ops-script")
    assert wrong.returncode == EXIT_CODES["refused"] == 4
    assert "waits for approval: it has not run" in wrong.stderr
    assert "approve it (True or 'approve')" in wrong.stderr
    assert cli(url, "runs", "decide", "r1", cid, "--deny", "--by", "ann").returncode == 0
    again = cli(url, "runs", "decide", "r1", cid, "--deny", "--by", "bob", json_out=True)
    assert again.returncode == 0 and json.loads(again.stdout) == {"recorded": False, "record": None}
    contra = cli(url, "runs", "decide", "r1", cid, "--approve", "--by", "bob")
    assert contra.returncode == 4 and "already decided: denied by ann" in contra.stderr
    unknown = cli(url, "runs", "decide", "r1", "zz", "--approve", "--by", "bob")
    assert unknown.returncode == 4 and "none applies to 'zz'" in unknown.stderr
    assert [r.kind for r in store.read("r1")].count("decision") == 1
    assert cli(url, "runs", "decide", "nope", cid, "--approve", "--by", "b").returncode == 3


def test_follow_prints_a_run_driven_in_another_process_as_it_goes(store_url: Any) -> None:
    store, url = store_url
    paused(store)
    cid = call_id(store)
    assert cli(url, "runs", "decide", "r1", cid, "--approve", "--by", "ann").returncode == 0
    seen = store.run_info("r1").last_seq
    env = {**os.environ, "AGENTLOOPS_STORE": url}
    argv = [sys.executable, "-m", "agentloops", "runs", "follow", "r1", "--after", str(seen)]
    follower = subprocess.Popen(
        [*argv, "--json", "--timeout", "60"], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )
    time.sleep(0.5)  # it may start before or after the drive: either way it gets it all
    loop(store, "Refunded.").resume("r1")
    out, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0
    printed = [json.loads(line) for line in out.splitlines()]
    journal = store.read("r1", after=seen)
    assert [(r["seq"], r["kind"]) for r in printed] == [(r.seq, r.kind) for r in journal]
    assert printed[-1]["kind"] == "result" and printed[-1]["data"]["answer"] == "Refunded."
    events = cli(url, "runs", "follow", "r1", "--events")
    assert events.returncode == 0
    assert [line.split()[1] for line in events.stdout.splitlines()][-3:] == [
        "ToolCallFinished",
        "ModelCallFinished",
        "RunFinished",
    ]


def test_delete_then_the_run_is_not_found(store_url: Any) -> None:
    store, url = store_url
    paused(store)
    assert cli(url, "runs", "delete", "r1").stdout == "deleted run r1\n"
    gone = cli(url, "runs", "show", "r1")
    assert gone.returncode == EXIT_CODES["not_found"] and "r1" in gone.stderr
    assert cli(url, "runs", "delete", "r1").returncode == 3


def test_a_missing_or_bad_store_is_a_usage_error(tmp_path: Path) -> None:
    none = cli(None, "runs", "list")
    assert none.returncode == 2 and "AGENTLOOPS_STORE" in none.stderr
    bad = cli("mysql://x", "runs", "list")
    assert bad.returncode == 2 and "sqlite:///runs.db" in bad.stderr
    missing = cli(f"sqlite:///{tmp_path / 'typo.db'}", "runs", "list")
    assert missing.returncode == 2 and "no SQLite store" in missing.stderr
    flags = cli(f"sqlite:///{tmp_path}", "runs", "decide", "r1", "c1", "--by", "ann")
    assert flags.returncode == 2 and "--approve" in flags.stderr  # one choice is required


def test_follow_gives_up_after_its_timeout(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        paused(store)
        store.append(store.acquire("r1", ttl=5), "custom", {})  # a drive that never ends
    err = io.StringIO()
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    args = ["runs", "follow", "r1", "--timeout", "0.2", "--store", url]
    assert main(args, stdout=io.StringIO(), stderr=err) == EXIT_CODES["timeout"]
    assert "no new record" in err.getvalue()


def test_tables_are_drawn_with_rich_on_a_terminal() -> None:
    stream = io.StringIO()
    Output(stream, rich=True).table("runs", ("run", "status"), [("r1", "paused")])
    drawn = stream.getvalue()
    assert "┃ run" in drawn and "│ r1" in drawn and "paused" in drawn
    plain = io.StringIO()
    Output(plain).table("runs", ("run", "status"), [("r1", "paused")])  # not a terminal
    assert plain.getvalue() == "runs\nrun  status\nr1   paused\n"


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "list"],
        ["runs", "list", "--kind", "react", "--json"],
        ["runs", "show", "r1"],
        ["runs", "show", "r1", "--json"],
        ["runs", "follow", "r1"],
        ["runs", "follow", "r1", "--json"],
        ["runs", "follow", "r1", "--events", "--after", "2"],
        ["runs", "follow", "r1", "--events", "--json"],
    ],
)
def test_in_process_the_commands_print_what_the_command_line_does(
    command: list[str], tmp_path: Path
) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        paused(store)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    out, err = io.StringIO(), io.StringIO()
    assert main([*command, "--store", url], stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue() == cli(url, *command).stdout and out.getvalue()


def test_in_process_decide_and_delete(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        paused(store)
        cid = call_id(store)
    url = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["runs", "decide", "r1", cid, "--skip", "--by", "a", *url], stderr=err) == 4
    assert "'rerun' and 'skip' apply to a call that started" in err.getvalue()
    assert main(["runs", "decide", "r1", cid, "--deny", "--by", "a", *url], stdout=out) == 0
    assert main(["runs", "decide", "r1", cid, "--deny", "--by", "a", *url], stdout=out) == 0
    assert out.getvalue().splitlines()[-1].endswith("decided so already; nothing added")
    assert main(["runs", "delete", "r1", "--json", *url], stdout=out) == 0
    assert out.getvalue().splitlines()[-1] == '{"deleted": true}'
    assert main(["runs", "delete", "r1", *url], stdout=out) == 3
    assert out.getvalue().splitlines()[-1] == "no run 'r1'"


def test_runs_list_shows_sub_runs_under_their_parents_unless_all(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "runs.db") as store:
        inner = ReActLoop(ScriptedModel(["A."]), [])
        outer = ReActLoop(
            ScriptedModel([use_tools(("helper", {"task": "a"})), "Done."]),
            [inner.as_tool("helper", "Helps.")],
            store=store,
        )
        assert outer.run("q", run_id="top").answer == "Done."
        [sub] = [i.run_id for i in store.list_runs() if i.run_id != "top"]
    url = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    out = io.StringIO()
    assert main(["runs", "list", "--json", *url], stdout=out) == 0
    assert [r["run_id"] for r in json.loads(out.getvalue())] == ["top"]
    out = io.StringIO()
    assert main(["runs", "list", "--all", "--json", *url], stdout=out) == 0
    assert sorted(r["run_id"] for r in json.loads(out.getvalue())) == sorted(["top", sub])
    out = io.StringIO()
    assert main(["runs", "list", *url], stdout=out) == 0
    assert "1 run(s), and 1 sub-run(s) below them (--all)" in out.getvalue()
    assert sub not in out.getvalue()
