"""Two processes resuming, or approving, one Plan-and-Execute run at the same moment, over a
`SQLiteCheckpointer` (old code's spelling of a run store): the tool runs once.

Each child process builds its own `PlanAndExecute` over the same file, waits at a barrier
until its twin is ready, and resumes the run (one on each driver). The tool appends a line
to a ledger file, then takes a while, so the twin asks while the run is being driven.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentloops import ModelError, PlanAndExecute, SQLiteCheckpointer
from agentloops.testing import ScriptedModel, respond_structured, use_tools

TOOLS = textwrap.dedent(
    """
    import time
    from pathlib import Path
    from agentloops import tool

    def make_tools(ledger):
        def booked(what):
            with Path(ledger).open("a") as f:
                f.write(what + "\\n")
            time.sleep(0.5)  # the twin asks while this call runs
            return f"{what} done"

        @tool(read_only=False, requires_approval=True)
        def pay(amount: int) -> str:
            '''Pay an amount.'''
            return booked(f"pay {amount}")

        @tool(read_only=False)
        def charge(amount: int) -> str:
            '''Charge an amount.'''
            return booked(f"charge {amount}")

        return [pay, charge]
    """
)
_namespace: dict[str, Any] = {}
exec(TOOLS, _namespace)  # the same tools run here and in the children

CHILD = TOOLS + textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from agentloops import PlanAndExecute, SQLiteCheckpointer
    from agentloops.testing import ScriptedModel, use_tools

    db, ledger, run_id, decisions, script, driver, ready, twin = sys.argv[1:9]
    items = [use_tools((i["tool"], i["args"])) if isinstance(i, dict) else i
             for i in json.loads(script)]
    agent = PlanAndExecute(ScriptedModel(items), make_tools(ledger),
                           checkpointer=SQLiteCheckpointer(db))
    Path(ready).touch()
    deadline = time.monotonic() + 60
    while not Path(twin).exists() and time.monotonic() < deadline:  # the barrier
        time.sleep(0.005)
    try:
        if driver == "async":
            result = asyncio.run(agent.aresume(run_id, json.loads(decisions)))
        else:
            result = agent.resume(run_id, json.loads(decisions))
        print(json.dumps({"answer": result.answer, "stop": result.stop_reason}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    """
)


def race(db: Path, ledger: Path, run_id: str, decisions: Any, script: list[Any]) -> list[Any]:
    """Resume `run_id` from two processes at once; what each of them printed."""
    argv = [str(db), str(ledger), run_id, json.dumps(decisions), json.dumps(script)]
    ready = [db.with_name(f"ready-{name}") for name in ("sync", "async")]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *argv, driver, str(mine), str(theirs)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for driver, mine, theirs in [("sync", *ready), ("async", *reversed(ready))]
    ]
    outs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outs.append(json.loads(out))
    return outs


def booked(ledger: Path) -> list[str]:
    return ledger.read_text().split("\n")[:-1] if ledger.exists() else []


def one_drove(outs: list[Any], answer: str) -> None:
    """One child drove the run to `answer`; the other was refused while it did (or, had it
    come after, got the same result without running anything)."""
    drove = [o for o in outs if "answer" in o]
    assert drove and all(o == {"answer": answer, "stop": "answered"} for o in drove), outs
    assert all(o.get("error") == "RunLeased" for o in outs if "answer" not in o), outs


def test_two_processes_approving_one_paused_run_pay_once(tmp_path: Path) -> None:
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.txt"
    plan = {"steps": [{"step_number": 1, "description": "pay the invoice"}]}
    model = ScriptedModel([respond_structured(plan), use_tools(("pay", {"amount": 120}))])
    tools = _namespace["make_tools"](ledger)
    paused = PlanAndExecute(model, tools, checkpointer=SQLiteCheckpointer(db)).run(
        "Pay the invoice.", run_id="invoice"
    )
    assert paused.stop_reason == "approval_required" and booked(ledger) == []
    decisions = {paused.pending_approvals[0].id: True}
    outs = race(db, ledger, "invoice", decisions, ["paid", "The invoice is paid."])
    one_drove(outs, "The invoice is paid.")
    assert booked(ledger) == ["pay 120"]


def test_two_processes_resuming_one_failed_run_charge_once(tmp_path: Path) -> None:
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.txt"
    plan = {"steps": [{"step_number": 1, "description": "charge the card"}]}
    model = ScriptedModel([respond_structured(plan), ModelError("overloaded", status=529)])
    tools = _namespace["make_tools"](ledger)
    with pytest.raises(ModelError):
        PlanAndExecute(model, tools, checkpointer=SQLiteCheckpointer(db)).run(
            "Charge the card.", run_id="card"
        )
    script = [{"tool": "charge", "args": {"amount": 80}}, "charged", "The card is charged."]
    outs = race(db, ledger, "card", None, script)
    one_drove(outs, "The card is charged.")
    assert booked(ledger) == ["charge 80"]
