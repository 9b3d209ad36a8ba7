"""The other direction: our tools, or a whole loop, as an MCP server any MCP client can use.

A registry's tools are listed with their schemas and annotations (read-only, idempotent)
and called through `ToolRegistry.acall`, so validation, timeouts, output caps and error
results work as in our loops; the key a client sends in `_meta["agentloops/idempotency-key"]`
becomes the call's `idempotency_key()`. A loop (anything with `arun(task)`) is one tool:
its task in, its answer out; a run that does not answer is an error result saying why.

Rule: the server side knows tools and the SDK's server; a loop only as something with
`arun`, never a loop class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol, runtime_checkable

from mcp import types
from mcp.server.lowlevel import Server

from agentloops.errors import ConfigurationError
from agentloops.messages import ToolOutcome
from agentloops.tools import Tool, ToolRegistry

from ._session import KEY_META

_TASK_SCHEMA = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task, in plain words."}},
    "required": ["task"],
    "additionalProperties": False,
}


@runtime_checkable
class Runnable(Protocol):
    """A loop: `ReActLoop`, `ReWOOPipeline`, `PlanAndExecute`, or anything with `arun`."""

    async def arun(self, task: str) -> Any: ...


def mcp_server(
    tools_or_loop: ToolRegistry | Iterable[Tool | Callable[..., Any]] | Runnable,
    *,
    name: str = "agentloops",
    tool_name: str | None = None,
    description: str | None = None,
    client_approves: bool = False,
) -> Server[Any]:
    """The SDK's low-level `Server` for our tools or a loop (`serve` runs one).

    Args:
        tools_or_loop: a `ToolRegistry` or tools (each served as itself), or a loop
            (served as one tool, `tool_name`, that takes `{"task": ...}`).
        name: the server's name, as clients see it.
        tool_name: the loop's tool name (default: `name`).
        description: the loop's tool description.
        client_approves: serve tools that need a human's approval, leaving the asking to
            the MCP client (most ask their user before every call); without it such tools
            are a `ConfigurationError`, since nothing here could ask.

    Raises:
        ConfigurationError: a tool needs approval and `client_approves` is False, or the
            argument is neither tools nor a loop.
    """
    server: Server[Any]
    if isinstance(tools_or_loop, Runnable) and not isinstance(tools_or_loop, ToolRegistry):
        server = _loop_server(tools_or_loop, name, tool_name or name, description)
    elif isinstance(tools_or_loop, ToolRegistry | Iterable):
        registry = (
            tools_or_loop
            if isinstance(tools_or_loop, ToolRegistry)
            else ToolRegistry(tools_or_loop)
        )
        asking = sorted(registry.asking)
        if asking and not client_approves:
            raise ConfigurationError(
                f"tools {asking} need a human's approval, which an MCP server cannot ask "
                "for: pass client_approves=True to let the MCP client ask its user"
            )
        server = _tools_server(registry, name)
    else:
        raise ConfigurationError(
            f"serve() takes a ToolRegistry, tools, or a loop with arun(); got {tools_or_loop!r:.60}"
        )
    return server


def serve(
    tools_or_loop: ToolRegistry | Iterable[Tool | Callable[..., Any]] | Runnable,
    *,
    name: str = "agentloops",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    tool_name: str | None = None,
    description: str | None = None,
    client_approves: bool = False,
) -> None:
    """Serve our tools, or a loop as one tool, over MCP until stopped (blocks).

    `transport="stdio"` answers on stdin/stdout (what an MCP client starts as a
    subprocess); `"http"` is streamable HTTP at `http://{host}:{port}{path}`. The other
    arguments are `mcp_server`'s.

    Examples:
        A file `notes_server.py` that an MCP client starts with `python notes_server.py`:

            from agentloops.mcp import serve
            from my_tools import add_note, find_notes
            serve([add_note, find_notes], name="notes")
    """
    if transport not in ("stdio", "http"):
        raise ConfigurationError(f"transport must be 'stdio' or 'http', got {transport!r}")
    server = mcp_server(
        tools_or_loop,
        name=name,
        tool_name=tool_name,
        description=description,
        client_approves=client_approves,
    )
    if transport == "stdio":
        asyncio.run(_serve_stdio(server))
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _tools_server(registry: ToolRegistry, name: str) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_listed(t) for t in registry])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = (params.meta or {}).get(KEY_META)
        arguments = dict(params.arguments or {})
        key = key if isinstance(key, str) else None
        return _result(await registry.acall(params.name, arguments, key=key))

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _loop_server(loop: Runnable, name: str, tool_name: str, about: str | None) -> Server[Any]:
    listed = types.Tool(
        name=tool_name,
        description=about or f"Give the agent {name!r} a task; it answers when done.",
        input_schema=_TASK_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        task = (params.arguments or {}).get("task")
        if params.name != tool_name:
            return _error(f"unknown tool {params.name!r}; this server has {tool_name!r}")
        if not isinstance(task, str) or not task.strip():
            return _error("task: a non-empty string is required")
        try:
            result = await loop.arun(task)
        except Exception as exc:  # a run that raised (a model error, a limit) tells why
            return _error(f"the run failed: {type(exc).__name__}: {exc}")
        return _answered(result)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _listed(t: Tool) -> types.Tool:
    hints = types.ToolAnnotations(
        read_only_hint=t.read_only,
        idempotent_hint=True if t.on_doubt == "rerun" and not t.read_only else None,
    )
    return types.Tool(
        name=t.name, description=t.description, input_schema=t.input_schema, annotations=hints
    )


def _answered(result: Any) -> types.CallToolResult:
    answer = str(getattr(result, "answer", result))
    stop = getattr(result, "stop_reason", "answered")
    if stop == "answered":
        return types.CallToolResult(content=[types.TextContent(text=answer)])
    detail = getattr(result, "detail", "")
    why = f"the run stopped without an answer ({stop}{': ' + detail if detail else ''})"
    return _error(f"{why}\n{answer}" if answer else why)


def _result(outcome: ToolOutcome) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=outcome.content)], is_error=outcome.is_error
    )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
