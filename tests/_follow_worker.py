"""Processes for tests/journal/test_journal_follow.py: a durable run that waits on a file, and
a follower that prints what it reads.

    python tests/_follow_worker.py drive BACKEND TARGET RUN_ID GATE
    python tests/_follow_worker.py follow BACKEND TARGET RUN_ID AFTER (sync|async)

`drive` runs a ReAct loop under `RUN_ID` whose tool waits until the file `GATE` exists,
then answers; `follow` prints one JSON line per record it is given (`seq`, `kind`), and
`{"end": true}` when the stream ends.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from agentloops import PostgresStore, ReActLoop, SQLiteStore, tool
from agentloops.journal import RunStore
from agentloops.testing import ScriptedModel, use_tools


def open_store(backend: str, target: str) -> RunStore:
    return SQLiteStore(target) if backend == "sqlite" else PostgresStore(target)


def drive(store: RunStore, run_id: str, gate: str) -> None:
    @tool
    def wait_for_gate(name: str) -> str:
        """Waits until the test opens the gate."""
        deadline = time.monotonic() + 60
        while not Path(gate).exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the gate never opened")
            time.sleep(0.01)
        return f"{name} passed"

    model = ScriptedModel(
        [
            use_tools(("wait_for_gate", {"name": "first"})),
            use_tools(("wait_for_gate", {"name": "second"})),
            "Both passed.",
        ]
    )
    result = ReActLoop(model, [wait_for_gate], store=store).run("Pass the gates.", run_id=run_id)
    print(json.dumps({"answer": result.answer}), flush=True)


def follow(store: RunStore, run_id: str, after: int, mode: str) -> None:
    def show(seq: int, kind: str) -> None:
        print(json.dumps({"seq": seq, "kind": kind}), flush=True)

    if mode == "sync":
        for record in store.follow(run_id, after=after, timeout=60):
            show(record.seq, record.kind)
    else:

        async def main() -> None:
            async for record in store.afollow(run_id, after=after, timeout=60):
                show(record.seq, record.kind)

        asyncio.run(main())
    print(json.dumps({"end": True}), flush=True)


if __name__ == "__main__":
    what, backend, target, run_id = sys.argv[1:5]
    store = open_store(backend, target)
    if what == "drive":
        drive(store, run_id, sys.argv[5])
    else:
        follow(store, run_id, int(sys.argv[5]), sys.argv[6])
