"""The MCP server bench/mcp_overhead.py times calls to: one read-only tool, over stdio."""

from __future__ import annotations

from mcp import types
from mcp.server.mcpserver import MCPServer

app = MCPServer("bench", log_level="ERROR")


@app.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


if __name__ == "__main__":
    app.run()
