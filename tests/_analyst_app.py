"""Shared by the Market Analyst tests: the CLI run in a temporary directory, offline.

(On `sys.path` because pytest puts the tests folder there, as for `_dask_helpers`.)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from market_analyst import cli
from market_analyst.store import AnalystStore

from agentloops import ModelClient


class App:
    """`app("Quick snapshot of NVDA", "--yes")` runs the CLI with tool latency off; the
    state and reports go to the test's directory."""

    def __init__(self, root: Path):
        self.root = root
        self.store = AnalystStore(root / ".agentloops", root / "reports")

    def __call__(
        self, *argv: str, model: ModelClient | None = None, ask: Callable[[str], str] | None = None
    ) -> int:
        return cli.main([*argv, "--latency", "0"], model=model, ask=ask)

    def only_run(self) -> dict[str, Any]:
        [run_id] = self.store.run_ids()
        return self.store.get(run_id)

    def reports(self) -> list[Path]:
        folder = self.root / "reports"
        return sorted(folder.iterdir()) if folder.exists() else []


def make_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    monkeypatch.chdir(tmp_path)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "EDITOR", "VISUAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps at the terminal width
    return App(tmp_path)


def answers(*replies: str | BaseException) -> Callable[[str], str]:
    """A prompt that answers with `replies` in order (an exception is raised), recording
    each question in `.asked`."""
    queue = list(replies)
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    ask.asked = asked  # type: ignore[attr-defined]
    return ask


WORKER = Path(__file__).with_name("_analyst_worker.py")


def child_env() -> dict[str, str]:
    """The environment for a child process: offline, unbuffered, wide."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return {**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


class Worker:
    """tests/_analyst_worker.py in a process of its own, killed at the end."""

    def __init__(self, *argv: object):
        command = [sys.executable, str(WORKER), *map(str, argv)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=child_env())

    def read(self, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"worker {self.proc.pid} said nothing within {timeout}s"
        line = self.proc.stdout.readline()
        assert line, f"worker {self.proc.pid} exited with {self.proc.wait()}"
        said: dict[str, Any] = json.loads(line)
        return said

    def kill(self) -> None:
        """SIGKILL: no `finally`, no release; its leases lapse on their own."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` served by uvicorn on a free loopback port in a thread of this process; yields
    its address (the web extra must be installed)."""
    from market_analyst.web import serve

    sock = serve.bind(0)
    server = serve.server(app, quiet=True)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
        time.sleep(0.02)
    try:
        yield serve.url(sock)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
