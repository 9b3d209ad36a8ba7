"""Sub-runs under real faults, in real processes (tests/_subagent_worker.py) on one SQLite
file: an approval two levels down decided from another process, and a parent SIGKILLed mid
sub-run (or just after it) resumed in another process, where a ledger of side effects and
a log of every tool body and model call prove that what the sub-run recorded did not run
again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentloops.journal import SQLiteStore

WORKER = Path(__file__).parents[1] / "_subagent_worker.py"
DRIVERS = ["sync", "async"]

pytestmark = pytest.mark.slow


def worker(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run one process; its JSON line, or `None` when it was killed."""
    done = subprocess.run(
        [sys.executable, str(WORKER), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode == -9:
        return None
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def resumed(spec: dict[str, Any]) -> dict[str, Any]:
    """Resume in a new process, as often as it takes the killed holder's lease to lapse."""
    ends = time.monotonic() + 30
    while True:
        out = worker(spec)
        assert out is not None
        if out.get("error") != "RunLeased" or time.monotonic() > ends:
            return out
        time.sleep(0.2)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "db": str(tmp_path / "runs.db"),
        "ledger": str(tmp_path / "ledger.jsonl"),
        "log": str(tmp_path / "log.jsonl"),
    }


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_approval_two_levels_down_is_decided_from_another_process(
    files: dict[str, str], driver: str
) -> None:
    base = {**files, "driver": driver, "scenario": "approve", "run_id": "top"}
    paused = worker({**base, "op": "run"})
    assert paused is not None and paused["stop_reason"] == "approval_required"
    assert paused["paths"] == {"p1": ["top", "top:t1", "top:t1:m1"]}
    done = worker({**base, "op": "resume", "decisions": {"p1": True}})
    assert done is not None and done["answer"] == "t1: m1: payer: paid 7"
    assert done["model_calls"] == 6
    again = worker({**base, "op": "resume", "decisions": {"p1": True}})  # a second approver
    assert again is not None and again["answer"] == done["answer"]
    assert [line["key"] for line in lines(Path(files["ledger"]))] == ["top:t1:m1:p1"]
    with SQLiteStore(files["db"]) as store:
        assert {i.run_id: i.status for i in store.list_runs()} == dict.fromkeys(
            ("top", "top:t1", "top:t1:m1"), "finished"
        )


KILLS = {
    "mid-sub-run": {"at": "model", "role": "worker", "n": 3},
    "mid-sub-run-tool": {"at": "tool", "entry": "step 2", "when": "after"},
    "after-the-sub-run": {"at": "model", "role": "top", "n": 2},
}


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("kill", list(KILLS))
def test_a_parent_killed_mid_sub_run_resumes_it_in_another_process_without_redoing_it(
    files: dict[str, str], driver: str, kill: str
) -> None:
    base = {**files, "driver": driver, "scenario": "steps", "run_id": "top"}
    assert worker({**base, "op": "run", "kill": KILLS[kill]}) is None  # SIGKILLed
    log = lines(Path(files["log"]))
    first = log[0]["pid"]
    assert log[-1]["event"] == "killed"
    done = resumed({**base, "op": "resume"})
    assert done["stop_reason"] == "answered", done
    parts = "worker: wrote step 1 / wrote step 2 / wrote step 3"
    assert done["answer"] == f"top: {parts} | wrote top"
    assert done["model_calls"] == 6 and done["tokens"] == 90  # each call counted once

    ledger = [line["key"] for line in lines(Path(files["ledger"]))]
    assert sorted(ledger) == ["top:t1:w1", "top:t1:w2", "top:t1:w3", "top:t2"]  # each once
    later = [line for line in lines(Path(files["log"])) if line["pid"] != first]
    ran_again = {line["key"] for line in later if line["event"] == "tool"}
    asked_again = [line["role"] for line in later if line["event"] == "model"]
    if kill == "mid-sub-run":  # w1 and w2 were recorded: they do not run again
        assert "top:t1:w1" not in ran_again and "top:t1:w2" not in ran_again
        assert asked_again == ["worker", "worker", "top"]  # the call cut off, then on
    elif kill == "mid-sub-run-tool":  # w2 took effect, unrecorded: run again with its key
        assert "top:t1:w1" not in ran_again and "top:t1:w2" in ran_again
        assert asked_again == ["worker", "worker", "top"]
    else:  # the sub-run had finished and its outcome was recorded: it is replayed
        assert not any(key.startswith("top:t1:") for key in ran_again)
        assert asked_again == ["top"]
    with SQLiteStore(files["db"]) as store:
        assert {i.run_id: i.status for i in store.list_runs()} == {
            "top": "finished",
            "top:t1": "finished",
        }
        # The resumed holder took the top run over, and the sub-run with it when it met it.
        assert store.run_info("top").epoch == 2
        assert store.run_info("top:t1").epoch == (1 if kill == "after-the-sub-run" else 2)
