"""MCP: tools from MCP servers in any loop, and our tools (or a loop) served over MCP.

    from agentloops.mcp import MCPToolset

    with MCPToolset.stdio("python", ["notes_server.py"]) as notes:
        ReActLoop(model, [add, notes]).run("...")

Needs the `mcp` extra (`pip install 'agentloops-kit[mcp]'`): the official SDK, `mcp` 2.x.
`import agentloops` never imports this package. See docs/mcp.md.

Rule: the public names only; `import agentloops` never imports this package, and nothing
below the kits imports it.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401
except ModuleNotFoundError as exc:  # say which extra brings it, not just what is missing
    raise ModuleNotFoundError(
        f"agentloops.mcp needs the MCP SDK ({exc.name} is not installed): "
        "pip install 'agentloops-kit[mcp]'",
        name=exc.name,
    ) from exc

from ._server import mcp_server, serve
from ._session import KEY_META
from ._tool import ApprovalChoice, MCPTool
from ._toolset import MCPConnectionError, MCPToolset

__all__ = [
    "KEY_META",
    "ApprovalChoice",
    "MCPConnectionError",
    "MCPTool",
    "MCPToolset",
    "mcp_server",
    "serve",
]
