"""The Market Analyst on the run store with real processes: a run, a decision or a trade
that another process holds is refused with the lease's holder and expiry (exit status 75
at the command line, 409 in the web app); a crashed holder's run is taken over once its
lease lapses and continues from the journals, no model or tool call on record made again;
a trade proposal or decision whose process died resolves itself on the next attempt;
and a state file from before the journals is refused with what to do."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from _analyst_app import Worker, child_env, make_app
from market_analyst import models, tools
from market_analyst.archive import SQLiteArchive
from market_analyst.demo_model import DemoModel
from market_analyst.journal import LEASED
from market_analyst.store import AnalystStore
from market_analyst.trading import Trader
from market_analyst.web.app import create_app
from starlette.testclient import TestClient

from agentloops import RunLeased, RunNotFound

pytestmark = [pytest.mark.usefixtures("instant_analyst_tools"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
THESIS = "Investment thesis and strategic risks for MSFT"
TTL = 2.0  # the second processes' leases: a crashed one's run is free two seconds later


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return make_app(tmp_path, monkeypatch)


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*argv: object) -> Worker:
        started.append(Worker(*argv))
        return started[-1]

    yield start
    for worker in started:
        worker.kill()


def _until(condition: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _lapsed(store: AnalystStore, run_id: str) -> Callable[[], bool]:
    return lambda: not store.runs.run_info(run_id).leased


# -- a run another process drives ------------------------------------------------------------


def test_a_run_held_by_another_process_is_refused_then_taken_over_when_it_crashes(
    app, capsys
) -> None:
    command = [sys.executable, str(ROOT / "examples" / "market_analyst.py"), THESIS]
    command += ["--offline", "--latency", "5", "--lease-ttl", "3"]
    first = subprocess.Popen(command, cwd=app.root, env=child_env(), stdout=subprocess.DEVNULL)
    try:
        _until(lambda: bool(app.store.run_ids()))
        [run_id] = app.store.run_ids()
        research = f"{run_id}/research"

        def finished() -> list[Any]:
            try:
                return [r for r in app.store.runs.read(research) if r.kind == "tool_finished"]
            except RunNotFound:  # the research has not started yet
                return []

        _until(lambda: app.store.runs.run_info(run_id).leased and bool(finished()))
        capsys.readouterr()
        for argv in (["--resume", run_id], ["--resume", run_id, "--approve"]):
            assert app(*argv) == LEASED
            said = " ".join(capsys.readouterr().out.split())
            assert re.search(
                rf"{run_id} is held by \S+:{first.pid}:\w+ \(cli\) until \d\d:\d\d:\d\d UTC", said
            ), said
        assert app("--list") == 0
        assert f"Running now: {run_id}, held by" in capsys.readouterr().out
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: nothing released, nothing recorded
        first.wait(10)
    models_before = sum(r.kind == "model" for r in app.store.runs.read(research))
    tools_before = len(finished())
    assert app.store.get(run_id)["status"] == "running"
    _until(_lapsed(app.store, run_id), 10)
    capsys.readouterr()
    assert app("--resume", run_id, "--offline") == 0
    out = capsys.readouterr().out
    record = app.store.get(run_id)
    assert record["status"] == "pending" and record["verdict"]["verdict"] == "pass"
    # No model call on record was made again: the journal holds each once (13, as in an
    # uninterrupted run), and this process made only those that were missing.
    journal = app.store.runs.read(research)
    assert sum(r.kind == "model" for r in journal) == 13
    roles = record["calls_by_role"]
    live = sum(roles.get(r, 0) for r in ("planner", "executor", "replanner", "reporter"))
    assert live == 13 - models_before
    # Nor a tool call with a recorded outcome: only the missing ones started here.
    assert out.count("▶ ") == len(finished()) - tools_before == 5 - tools_before
    assert len({r.key for r in journal if r.kind == "tool_started"}) == 5


def test_the_page_names_who_holds_a_run_and_decides_it_once_the_holder_is_gone(
    tmp_path: Path, workers
) -> None:
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    clients = models.build(models.ModelSettings(provider="offline"))
    with TestClient(create_app(store, clients, user="tester"), base_url="http://127.0.0.1") as web:
        run_id = web.post("/api/runs", json={"request": "Quick snapshot of NVDA"}).json()["run_id"]
        web.get(f"/api/runs/{run_id}/events")  # the feed ends when the run waits for a person
        holder = workers("hold", tmp_path / ".agentloops", run_id, TTL)
        held = holder.read()
        assert held["record"] == "pending"
        refused = web.post(f"/api/runs/{run_id}/decision", json={"action": "approve"})
        assert refused.status_code == 409
        assert refused.json()["error"].startswith(f"{run_id} is held by {held['held']} until ")
        assert refused.json()["lease"]["holder"] == held["held"]
        view = web.get(f"/api/runs/{run_id}").json()
        assert view["lease"]["holder"] == held["held"] and view["status"] == "pending"
        holder.kill()
        _until(_lapsed(store, run_id), 10)
        approved = web.post(f"/api/runs/{run_id}/decision", json={"action": "approve"})
        assert approved.status_code == 200 and approved.json()["run"]["status"] == "published"
        assert web.get(f"/api/runs/{run_id}").json()["lease"] is None


# -- trades whose process died ---------------------------------------------------------------


def _published_buy(app: Any, request: str = "Quick snapshot of GOOGL") -> str:
    assert app(request, "--yes") == 0
    run_id = app.store.run_ids()[-1]
    assert app.store.get(run_id)["status"] == "published"
    return run_id


def test_a_proposal_whose_process_died_is_finished_by_the_next_attempt(
    app, workers, capsys
) -> None:
    run_id = _published_buy(app)
    trade_id = "tr-" + run_id.removeprefix("ma-")
    # The trader looks the price up, trades, then says what it did: its third model call
    # comes after the trade ran, and the proposal is left proposing.
    worker = workers("propose", app.root / ".agentloops", run_id, TTL, 3)
    assert worker.read() == {"blocked": 3}
    assert app.store.trades.get(trade_id)["status"] == "proposing"
    assert len(tools.ledger_entries(app.store.ledger_path)) == 1
    with pytest.raises(RunLeased) as held:
        Trader(DemoModel(), app.store).propose(run_id, by="me")
    assert f":{worker.proc.pid}:" in held.value.holder and "(worker)" in held.value.holder
    capsys.readouterr()
    assert app("--trades") == 0
    assert f"proposing (held by {held.value.holder})" in " ".join(capsys.readouterr().out.split())
    worker.kill()
    _until(_lapsed(app.store, trade_id), 10)
    assert app("--trades") == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "proposing (stopped; propose or decide again" in listed
    assert app("--resume", run_id, "--trade") == 0  # the next attempt finishes it
    trade = app.store.trades.get(trade_id)
    assert trade["status"] == "executed" and trade["requested_by"] == "worker"
    [entry] = tools.ledger_entries(app.store.ledger_path)
    assert (entry["quantity"], entry["approved_by"]) == (5, "guardian")
    loop = app.store.runs.read(f"{trade_id}/trader")
    assert [r.kind for r in loop].count("model") == 3  # the first two were not made again
    trades = [r for r in loop if r.kind == "tool_started" and r.data["name"] == "execute_trade"]
    assert len(trades) == 1


def test_a_decision_whose_process_died_is_applied_by_the_next_attempt(app, workers, capsys) -> None:
    assert app("Quick snapshot of AMZN", "--yes", "--trade", "--budget", "5000") == 0
    [trade] = app.store.trades.list()
    trade_id = trade["trade_id"]
    assert trade["status"] == "waiting"
    # Approved in another process, which dies after the trade ran, before settling it.
    worker = workers("decide", app.root / ".agentloops", trade_id, TTL, 1)
    assert worker.read() == {"blocked": 1}
    assert app.store.trades.get(trade_id)["status"] == "applying"
    capsys.readouterr()
    assert app("--deny-trade", trade_id, "--by", "carol") == LEASED
    said = " ".join(capsys.readouterr().out.split())
    assert f"{trade_id} is held by" in said and f":{worker.proc.pid}:" in said
    worker.kill()
    _until(_lapsed(app.store, trade_id), 10)
    assert app("--deny-trade", trade_id, "--by", "carol") == 1  # the approval stands...
    said = " ".join(capsys.readouterr().out.split())
    assert "already decided by worker" in said and "it is executed" in said
    [entry] = tools.ledger_entries(app.store.ledger_path)  # ... and ran exactly once
    assert (entry["quantity"], entry["approved_by"]) == (22, "worker")
    assert app.store.trades.get(trade_id)["status"] == "executed"


class Crash(BaseException):
    """Stands for the process dying (not an Exception: nothing handles it)."""


def test_a_trade_the_process_died_in_is_recorded_once(app, monkeypatch) -> None:
    run_id = _published_buy(app)
    record_trade = tools.record_trade

    def written_then_dies(*args: Any, **kwargs: Any) -> str:
        record_trade(*args, **kwargs)
        raise Crash  # the line is in the ledger; the loop never hears back

    with monkeypatch.context() as patch, pytest.raises(Crash):
        patch.setattr(tools, "record_trade", written_then_dies)
        Trader(DemoModel(), app.store).propose(run_id, by="me")
    trade_id = "tr-" + run_id.removeprefix("ma-")
    assert app.store.trades.get(trade_id)["status"] == "proposing"
    trade, new = Trader(DemoModel(), app.store).propose(run_id, by="me")
    assert new and trade["status"] == "executed"
    # The call in doubt ran again with the same idempotency key, which the ledger knew.
    [entry] = tools.ledger_entries(app.store.ledger_path)
    nonce = app.store.runs.run_info(f"{trade_id}/trader").meta["nonce"]
    assert entry["call_key"] == f"{trade_id}/trader:{trade['calls'][0]['call_id']}@{nonce}"
    loop = app.store.runs.read(f"{trade_id}/trader")
    kinds = [r.kind for r in loop if r.data.get("name") == "execute_trade"]
    assert kinds == ["tool_started", "tool_finished"]


# -- the state file --------------------------------------------------------------------------


def test_a_state_file_from_before_the_journals_is_refused_with_what_to_do(app, capsys) -> None:
    state = app.root / "old-state"
    state.mkdir()
    with closing(sqlite3.connect(state / "analyst.db")) as old:  # the earlier layout's runs
        old.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, state TEXT, updated_at REAL)")
        old.execute("""INSERT INTO runs VALUES ('ma-1', '{"status": "pending"}', 0)""")
        old.commit()
    SQLiteArchive(state / "analyst.db")
    for argv in (["--list"], ["Quick snapshot of NVDA"], ["--web"]):
        assert app(*argv, "--state-dir", str(state)) == 2
        said = " ".join(capsys.readouterr().out.split())
        assert "written by an earlier version of this example" in said
        assert f"mv {state / 'analyst.db'} {state / 'analyst.db.old'}" in said.replace("\n", "")
    tables = _tables(state / "analyst.db")
    assert "agentloops_runs" not in tables  # refused before anything was written
    (state / "analyst.db").rename(state / "analyst.db.old")
    assert app("Quick snapshot of NVDA", "--state-dir", str(state)) == 0


def _tables(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    finally:
        db.close()


@pytest.mark.parametrize("value", ["0", "-1", "x", "100000"])
def test_a_bad_lease_ttl_is_refused(app, capsys, value: str) -> None:
    with pytest.raises(SystemExit) as stop:
        app("--list", "--lease-ttl", value)
    assert stop.value.code == 2 and "--lease-ttl" in capsys.readouterr().err
