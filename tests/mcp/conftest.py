"""The MCP tests' real servers, as fixtures: subprocesses over stdio, or streamable HTTP on
127.0.0.1 at a free port. A module shares one server where its tests allow it (each start
costs about a second here)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from _mcp_helpers import NOTES, PYTHON, HTTPServer, Served, free_port, notes_toolset, wait_for_port


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
