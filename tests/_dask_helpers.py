"""Module-level work for the Dask tests: worker processes import this module by name.

It sits on `sys.path` because pytest puts the tests folder there (rootdir-relative
import mode), and Dask's spawned workers inherit the parent's `sys.path`.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from agentloops import ModelError, ReActLoop, ReActResult, Tool, tool
from agentloops.testing import ScriptedModel, use_tools

FAILING_TASK = 13


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


@tool
def whoami() -> int:
    """The id of the process this tool runs in."""
    return os.getpid()


@tool
def describe(pid: int) -> str:
    """Say which process a pid is."""
    return f"process {pid}, asked from process {os.getpid()}"


def agent_run(task: int) -> ReActResult:
    """One ReAct run, built inside the worker; task 13's model is unreachable."""
    if task == FAILING_TASK:
        model = ScriptedModel([ModelError("the model server is unreachable", status=503)])
    else:
        model = ScriptedModel([use_tools(("double", {"n": task})), f"{task} doubled is {2 * task}"])
    return ReActLoop(model, [double]).run(f"Double {task}", run_id=f"{task}@{os.getpid()}")


def run_with_tools(task: int, tools: list[Tool]) -> str:
    return f"{task} with {len(tools)} tools"


class Counter:
    """A tool's state guarded by a lock: a lock cannot leave its process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.n = 0

    def bump(self) -> int:
        """Count one more."""
        with self.lock:
            self.n += 1
            return self.n


locked_bump = Tool.from_function(Counter().bump)


def script_lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def script_made_tool(monkeypatch: Any) -> Tool:
    """A decorated tool as `python script.py` makes it: module __main__, found there by
    name (so it pickles by name), which no worker process can import back."""
    monkeypatch.setattr(script_lookup, "__module__", "__main__")
    monkeypatch.setattr(script_lookup, "__qualname__", "agentloops_test_lookup")
    made = Tool.from_function(script_lookup, name="lookup")
    monkeypatch.setattr(sys.modules["__main__"], "agentloops_test_lookup", made, raising=False)
    return made


# -- durable items (run_many(..., store=...)) ----------------------------------------------


def _ledger_line(path: str, line: dict[str, Any]) -> None:
    """One whole line per write (O_APPEND): lines from every process stay whole."""
    import json

    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def durable_item(task: dict[str, Any], item: Any) -> str:
    """One durable ReAct run of two tool calls. The item named `task["kill"]` kills its
    worker process on its second model call, the first time (a marker file says it did):
    its first tool call is on record by then, and must not run again."""
    import signal

    from agentloops import Message, ModelResponse, ToolCall, idempotency_key
    from agentloops.testing import FunctionModel

    n, where = task["n"], task["dir"]

    @tool
    def credit(step: int) -> str:
        """Credit one step (written to the ledger, with its idempotency key)."""
        _ledger_line(f"{where}/ledger.jsonl", {"key": idempotency_key(), "pid": os.getpid()})
        return f"credited {n}.{step}"

    def answer(request: Any) -> Any:
        done = sum(len(m.tool_results) for m in request.messages)
        marker = f"{where}/killed-{n}"
        if done == 1 and task.get("kill") == n and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-item
        if done < 2:
            call = ToolCall(f"c{n}-{done + 1}", "credit", {"step": done + 1})
            return ModelResponse(Message("assistant", (call,)), "tool_use")
        return f"item {n} done in process {os.getpid()}"

    loop = ReActLoop(FunctionModel(answer), [credit], store=item.store, lease_ttl=1.0)
    return str(item.drive(loop, f"Item {n}").answer)
