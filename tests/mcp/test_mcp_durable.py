"""Exactly once across a crash: a durable run (SQLite store) killed with SIGKILL while an
MCP call is in flight, resumed in a new process with a fresh server process. The server's
ledger proves the recorded call never ran again, and the call in doubt ran again with the
same idempotency key in `_meta` (its tool says on_doubt="rerun"), so a server could dedupe."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from _mcp_helpers import PYTHON

AGENT = str(Path(__file__).parent / "_durable_agent.py")


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_killed_mid_call_resumes_with_a_fresh_server_and_calls_nothing_twice(
    tmp_path: Path,
) -> None:
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.jsonl"
    args = [PYTHON, AGENT, str(db), str(ledger), "run-1"]
    first = subprocess.Popen([*args, "start"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(line["tool"] == "slow_note" for line in ledger_lines(ledger)):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the slow call never reached the server"
        time.sleep(0.05)
    server_pid = ledger_lines(ledger)[-1]["pid"]
    os.kill(first.pid, signal.SIGKILL)  # the agent dies mid-call...
    os.kill(server_pid, signal.SIGKILL)  # ...and its server with it
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    resumed = subprocess.run(
        [*args, "resume"], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(resumed.stdout.strip().splitlines()[-1]) == {
        "answer": "Both stored.",
        "stop_reason": "answered",
    }
    lines = ledger_lines(ledger)
    assert [line["tool"] for line in lines] == ["add_note", "slow_note", "slow_note"]
    stored, in_doubt, again = lines
    assert stored["pid"] == in_doubt["pid"] == server_pid
    assert again["pid"] != server_pid  # a fresh server process
    assert in_doubt["key"] == again["key"]  # the same key in _meta across the crash
    assert in_doubt["key"].startswith("run-1:") and stored["key"] != in_doubt["key"]
