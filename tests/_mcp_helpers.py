"""What the MCP tests (tests/mcp/) share: where the real servers are, how to open one, a
free port; their fixtures are in tests/mcp/conftest.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentloops.mcp import MCPToolset

SERVERS = Path(__file__).parent / "mcp" / "servers"
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
