"""Runs with sub-agents in a process of their own, for tests/engine/test_subruns_faults.py.

    python tests/_subagent_worker.py SPEC_JSON

The spec names the SQLite file (`db`), a ledger file (`ledger`: one JSON line per side
effect, appended once per idempotency key under a lock), a log file (`log`: one line each
time a tool body or a model runs, in any process), the driver ("sync" or "async"), and
what to do: `{"op": "run", "scenario": ..., "run_id": ...}` or `{"op": "resume", "run_id":
..., "decisions": {...}}`; `kill` makes the process SIGKILL itself at the Nth model call
of a role (`{"at": "model", "role": "worker", "n": 3}`) or in the ledger tool's call for
an entry, before or after its append (`{"at": "tool", "entry": "step 2", "when": "after"}`).
It prints
one JSON line: the result's stop reason, answer, pending calls and counts, or the error.

Scenarios (every model answers from the request alone, so a resumed run sees the same
replies in any process):

- "approve": top -> manager -> payer, whose call `pay` needs approval: the pause is two
  levels below the run at the top.
- "steps": top -> worker (a ReAct loop that writes three ledger entries one by one), next
  to a plain call of the same tool by the top run.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import sys
import traceback
from typing import Any

from _subagents import USAGE, calls, results_of  # tests/, this script's folder, is on the path

from agentloops import (
    ModelRequest,
    ModelResponse,
    ReActLoop,
    ToolCall,
    idempotency_key,
    tool,
)
from agentloops.journal import SQLiteStore
from agentloops.testing import FunctionModel, respond


class Worker:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.kill = spec.get("kill")
        self.models: dict[str, int] = {}

    def log(self, **line: Any) -> None:
        data = (json.dumps({**line, "pid": os.getpid()}) + "\n").encode()
        fd = os.open(self.spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def die(self, at: str, **where: Any) -> None:
        kill = self.kill
        if kill and kill["at"] == at and all(kill.get(k) == v for k, v in where.items()):
            self.log(event="killed", **kill)
            os.kill(os.getpid(), signal.SIGKILL)

    def model(self, role: str, answer: Any) -> FunctionModel:
        def reply(request: ModelRequest) -> ModelResponse:
            n = self.models[role] = self.models.get(role, 0) + 1
            self.log(event="model", role=role)
            self.die("model", n=n, role=role)
            found = answer(request)
            return respond(found, usage=USAGE) if isinstance(found, str) else found

        return FunctionModel(reply)

    def ledger_tool(self) -> Any:
        @tool(read_only=False, on_doubt="rerun")  # it dedupes by its key: safe to run again
        def write(entry: str) -> str:
            """Write a ledger entry."""
            full = idempotency_key()  # the journal key, and the nonce of the call's run
            key = full.partition("@")[0]
            self.log(event="tool", key=key, entry=entry)
            self.die("tool", entry=entry, when="before")
            with open(self.spec["ledger"], "a+") as ledger:
                fcntl.flock(ledger, fcntl.LOCK_EX)
                ledger.seek(0)
                if not any(json.loads(line)["full"] == full for line in ledger):
                    ledger.write(json.dumps({"key": key, "full": full, "entry": entry}) + "\n")
                    ledger.flush()
            self.die("tool", entry=entry, when="after")
            return f"wrote {entry}"

        return write

    def pay_tool(self) -> Any:
        @tool(read_only=False, requires_approval=True)
        def pay(invoice: str) -> str:
            """Pay an invoice."""
            key = idempotency_key().partition("@")[0]
            self.log(event="tool", key=key, entry=f"pay {invoice}")
            with open(self.spec["ledger"], "a") as ledger:
                ledger.write(json.dumps({"key": key, "entry": f"pay {invoice}"}) + "\n")
            return f"paid {invoice}"

        return pay

    def loop(self, store: SQLiteStore) -> ReActLoop:
        if self.spec["scenario"] == "approve":
            return self._approve(store)
        return self._steps(store)

    def _approve(self, store: SQLiteStore) -> ReActLoop:
        def payer(request: ModelRequest) -> Any:
            seen = results_of(request.messages)
            return f"payer: {seen[-1]}" if seen else calls(ToolCall("p1", "pay", {"invoice": "7"}))

        inner = ReActLoop(self.model("payer", payer), [self.pay_tool()])
        manager = ReActLoop(
            self.model("manager", _caller("payer", "m1")), [inner.as_tool("payer", "Pays.")]
        )
        return ReActLoop(
            self.model("top", _caller("manager", "t1")),
            [manager.as_tool("manager", "Manages.")],
            store=store,
            lease_ttl=1.0,
        )

    def _steps(self, store: SQLiteStore) -> ReActLoop:
        def worker(request: ModelRequest) -> Any:
            seen = results_of(request.messages)
            if len(seen) < 3:
                n = len(seen) + 1
                return calls(ToolCall(f"w{n}", "write", {"entry": f"step {n}"}))
            return f"worker: {' / '.join(seen)}"

        def top(request: ModelRequest) -> Any:
            seen = results_of(request.messages)
            if not seen:
                return calls(
                    ToolCall("t1", "worker", {"task": "Write three entries."}),
                    ToolCall("t2", "write", {"entry": "top"}),
                )
            return f"top: {' | '.join(seen)}"

        write = self.ledger_tool()
        inner = ReActLoop(self.model("worker", worker), [write])
        return ReActLoop(
            self.model("top", top), [inner.as_tool("worker", "Works."), write],
            store=store, lease_ttl=1.0,
        )  # fmt: skip


def _caller(tool_name: str, call_id: str) -> Any:
    def answer(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall(call_id, tool_name, {"task": request.messages[0].text}))
        return f"{call_id}: {seen[-1]}"

    return answer


def _go(loop: ReActLoop, spec: dict[str, Any]) -> Any:
    run_id, decisions, sync = spec["run_id"], spec.get("decisions"), spec["driver"] == "sync"
    if spec["op"] == "run":
        if sync:
            return loop.run("Do it.", run_id=run_id)
        return asyncio.run(loop.arun("Do it.", run_id=run_id))
    if sync:
        return loop.resume(run_id, decisions)
    return asyncio.run(loop.aresume(run_id, decisions))


def main() -> None:
    spec = json.loads(sys.argv[1])
    worker = Worker(spec)
    with SQLiteStore(spec["db"]) as store:
        loop = worker.loop(store)
        try:
            result = _go(loop, spec)
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)[:500]}))
            traceback.print_exc(file=sys.stderr)
            return
    print(
        json.dumps(
            {
                "stop_reason": result.stop_reason,
                "answer": result.answer,
                "pending": list(result.pending_paths),
                "paths": {k: list(v) for k, v in result.pending_paths.items()},
                "model_calls": result.model_calls,
                "tool_calls": result.tool_calls,
                "tokens": result.usage.total_tokens,
            }
        )
    )


if __name__ == "__main__":
    main()
