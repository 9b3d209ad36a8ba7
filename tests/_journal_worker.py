"""A process that drives a run store on command, for tests/test_journal_faults.py.

    python tests/_journal_worker.py sqlite /path/to/runs.db
    python tests/_journal_worker.py postgres "host=... dbname=..."

It prints `{"ready": pid}`, then reads one JSON command per line from stdin and answers each
with one JSON line: `{"ok": ...}` or `{"error": "<type>", "message": ..., ...}`. It holds at
most one lease (the last one acquired) and at most one `LeaseKeeper` on it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from agentloops import LeaseKeeper, PostgresStore, RunLeased, SQLiteStore, StoreError
from agentloops.journal import Lease, RunStore


def main() -> None:
    backend, target = sys.argv[1], sys.argv[2]
    store: RunStore = SQLiteStore(target) if backend == "sqlite" else PostgresStore(target)
    lease: Lease | None = None
    keeper: LeaseKeeper | None = None
    print(json.dumps({"ready": __import__("os").getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            reply: dict[str, Any]
            if op == "start":
                lease = store.start(command["run"], kind="react", ttl=command["ttl"])
                reply = {"ok": True, "epoch": lease.epoch, "holder": lease.holder}
            elif op == "acquire":
                lease = store.acquire(command["run"], ttl=command["ttl"])
                reply = {"ok": True, "epoch": lease.epoch, "holder": lease.holder}
            elif op == "append":
                assert lease is not None
                reply = {"ok": True, "seq": store.append(lease, command["kind"]).seq}
            elif op == "keep":
                assert lease is not None
                keeper = LeaseKeeper(store, lease, interval=command["interval"]).start()
                reply = {"ok": True}
            elif op == "keeper":  # wait up to `wait` seconds for the keeper to report a loss
                assert keeper is not None
                deadline = time.monotonic() + command["wait"]
                while keeper.lost is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                reply = {"ok": True, "lost": None if keeper.lost is None else str(keeper.lost)}
            else:
                raise ValueError(f"unknown op {op!r}")
        except RunLeased as exc:
            reply = {"error": "RunLeased", "message": str(exc), "holder": exc.holder}
        except StoreError as exc:
            reply = {"error": type(exc).__name__, "message": str(exc)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
