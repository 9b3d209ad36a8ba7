"""A durable ReAct run whose tools are an MCP server's, in a process of its own, for
tests/mcp/test_mcp_durable.py.

    python _durable_agent.py DB LEDGER RUN_ID start|resume

`start` runs the task: it stores a note, then starts a slow one (the test kills this
process while the server works on it); `resume` continues the journaled run in a new
process, with a new server process, and prints the result as JSON. The model answers from
the request alone, so both processes see the same replies.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentloops import ModelRequest, ModelResponse, ReActLoop, ReActResult, RunLeased
from agentloops.journal import SQLiteStore
from agentloops.mcp import MCPToolset
from agentloops.testing import FunctionModel, respond, use_tools

NOTES = Path(__file__).parent / "servers" / "notes.py"
TASK = "Store two notes."
LEASE = 1.0
"""Seconds a run's lease lasts unrenewed: how long the resumer waits for the dead one's."""


def model(request: ModelRequest) -> ModelResponse:
    turns = sum(1 for m in request.messages if m.role == "assistant")
    if turns == 0:
        return use_tools(("add_note", {"text": "first"}))
    if turns == 1:
        return use_tools(("slow_note", {"text": "second", "seconds": 60}))
    return respond("Both stored.")


def resumed(loop: ReActLoop, run_id: str) -> ReActResult:
    """Resume once the dead process's lease has run out."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return loop.resume(run_id)
        except RunLeased:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    db, ledger, run_id, mode = sys.argv[1:5]
    env = {"NOTES_LEDGER": ledger, "NOTES_SLOW": "60" if mode == "start" else "0"}
    notes = MCPToolset.stdio(
        sys.executable,
        [str(NOTES)],
        env=env,
        requires_approval=False,
        on_doubt={"slow_note": "rerun"},
    )
    with notes:
        store = SQLiteStore(db)
        loop = ReActLoop(FunctionModel(model), [notes], store=store, lease_ttl=LEASE)
        result = loop.run(TASK, run_id=run_id) if mode == "start" else resumed(loop, run_id)
    print(json.dumps({"answer": result.answer, "stop_reason": result.stop_reason}))


if __name__ == "__main__":
    main()
