"""What the MCP tests share: where the real servers are, how to open one, free ports, and
the fixtures `notes` and `notes_http` (a test module imports the ones it uses).

Real servers run as subprocesses over stdio, or over streamable HTTP on 127.0.0.1 at a free
port. A module shares one server where its tests allow it (each start costs about a
second here). There is no conftest.py here: `from conftest import ...` in tests/ must keep
finding tests/conftest.py, and this module's name is its own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentloops.mcp import MCPToolset

SERVERS = Path(__file__).parent / "servers"
NOTES = SERVERS / "notes.py"
PYTHON = sys.executable


@dataclass
class Served:
    """An open toolset on a notes server, and the ledger that server writes."""

    toolset: MCPToolset
    ledger: Path

    def lines(self) -> list[dict[str, Any]]:
        """The ledger's lines so far."""
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]


def notes_toolset(ledger: Path, *args: str, **options: Any) -> MCPToolset:
    """A toolset for tests/mcp/servers/notes.py over stdio, writing to `ledger`."""
    env = {"NOTES_LEDGER": str(ledger)}
    return MCPToolset.stdio(PYTHON, [str(NOTES), *args], env=env, **options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class HTTPServer:
    url: str
    process: subprocess.Popen[bytes]
    ledger: Path


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One notes server per test module, opened with `with` (its own event loop thread).
    Its `wait` tool gives up after 1 s, for the hung-server tests."""
    ledger = tmp_path_factory.mktemp("notes") / "ledger.jsonl"
    with notes_toolset(ledger, timeout={"wait": 1.0}) as toolset:
        yield Served(toolset, ledger)


@pytest.fixture(scope="module")
def notes_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    """The notes server over streamable HTTP on 127.0.0.1, for a module."""
    ledger = tmp_path_factory.mktemp("notes-http") / "ledger.jsonl"
    port = free_port()
    env = {**os.environ, "NOTES_LEDGER": str(ledger)}
    process = subprocess.Popen(
        [PYTHON, str(NOTES), "--http", str(port), "--name", "notes-http"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield HTTPServer(f"http://127.0.0.1:{port}/mcp", process, ledger)
    finally:
        process.terminate()
        process.wait(timeout=10)
