"""An MCP server with 300 tools (`tool_000` ... `tool_299`), each adding its number."""

from __future__ import annotations

from collections.abc import Callable

from mcp import types
from mcp.server.mcpserver import MCPServer

COUNT = 300


def numbered(n: int) -> Callable[[int], int]:
    def tool(x: int) -> int:
        return x + n

    tool.__doc__ = f"Add {n} to x."
    return tool


def main() -> None:
    app = MCPServer("many", log_level="ERROR")
    hints = types.ToolAnnotations(read_only_hint=True)
    for n in range(COUNT):
        app.add_tool(numbered(n), name=f"tool_{n:03d}", annotations=hints)
    app.run()


if __name__ == "__main__":
    main()
