"""`tool()` keeps the decorated function's signature for type checkers (checked with mypy)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = textwrap.dedent(
    '''
    from agentloops import Tool, ToolRegistry, tool

    @tool
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    @tool(name="fetcher", timeout=3, concurrent=False, requires_approval=lambda args: True)
    async def fetch(url: str) -> bytes:
        """Fetch."""
        return b""

    reveal_type(add)
    reveal_type(add(1, b=3))
    reveal_type(fetch)
    reveal_type(Tool.from_function(add.fn))
    add("one")
    _ = fetch(url=3)
    any_tool: Tool = add
    ToolRegistry([add, fetch, len])
    '''
)


@pytest.mark.slow  # about 20 s with a cold mypy cache, under 2 s with a warm one
def test_a_decorated_tool_keeps_its_signature_for_mypy(tmp_path):
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    out, err, status = api.run(
        [
            str(snippet),
            "--strict",
            "--no-error-summary",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
        ]
    )
    lines = [line.split(": ", 1)[1] for line in out.splitlines()]
    assert lines == [
        'note: Revealed type is "agentloops.tools.Tool[[a: int, b: int =], int]"',
        'note: Revealed type is "int"',
        'note: Revealed type is "agentloops.tools.Tool[[url: str], '
        'typing.Coroutine[Any, Any, bytes]]"',
        'note: Revealed type is "agentloops.tools.Tool[[a: int, b: int =], int]"',
        'error: Argument 1 to "__call__" of "Tool" has incompatible type "str"; '
        'expected "int"  [arg-type]',
        'error: Argument "url" to "__call__" of "Tool" has incompatible type "int"; '
        'expected "str"  [arg-type]',
    ], err
    assert status == 1
