"""A real MCP server for the tests, written with the SDK's `MCPServer`.

    python notes.py [--name NAME] [--http PORT]

Over stdio unless `--http` (streamable HTTP on 127.0.0.1:PORT/mcp). Every call that changes
something appends a line to the ledger file named by the `NOTES_LEDGER` environment
variable (JSON lines: tool, arguments, the idempotency key from `_meta`, the process id),
so a test can count what ran in which server process, across processes.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
from typing import Any, Literal

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

KEY = "agentloops/idempotency-key"
READ_ONLY = types.ToolAnnotations(read_only_hint=True)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()


class Filter(BaseModel):
    tag: str
    level: Literal["low", "high"] = "low"


async def garbled(ctx: Any, call_next: Any) -> Any:
    """Middleware: a call of the tool `garbage` is answered with a malformed result, and one
    of `refused` with a protocol error."""
    name = (ctx.params or {}).get("name") if ctx.method == "tools/call" else None
    if name == "garbage":
        return {"content": "not a list of blocks", "isError": "perhaps"}
    if name == "refused":
        raise MCPError(code=-32602, message="refused: this server is read-only today")
    return await call_next(ctx)


class Notes(MCPServer):
    """Tells a waiting tool when the client has listed the tools again."""

    def __init__(self, name: str):
        super().__init__(name, log_level="ERROR", middleware=[garbled])
        self.listed = anyio.Event()

    async def list_tools(self) -> list[types.Tool]:
        self.listed.set()
        return await super().list_tools()


def build(name: str) -> Notes:
    app = Notes(name)
    notes: dict[str, str] = {}

    def key(ctx: Context) -> str | None:
        meta = ctx.request_context.meta or {}
        return meta.get(KEY)  # type: ignore[return-value]

    def record(ctx: Context, tool: str, arguments: dict[str, Any]) -> None:
        path = os.environ.get("NOTES_LEDGER")
        if not path:
            return
        line = {"tool": tool, "args": arguments, "key": key(ctx), "pid": os.getpid()}
        with open(path, "a", encoding="utf-8") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            ledger.write(json.dumps(line) + "\n")

    @app.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool(annotations=READ_ONLY)
    def search_notes(query: str, limit: int = 5) -> str:
        """Find notes whose text contains the query."""
        found = [f"{k}: {v}" for k, v in notes.items() if query.lower() in v.lower()]
        return "\n".join(found[:limit]) or "no notes match"

    @app.tool(annotations=READ_ONLY)
    def filtered(filter: Filter, count: int) -> str:
        """Count notes under a filter (a nested schema, for argument checks)."""
        return f"{count} notes tagged {filter.tag} at {filter.level}"

    @app.tool()
    def add_note(text: str, ctx: Context) -> str:
        """Store a note; says its id."""
        record(ctx, "add_note", {"text": text})
        note_id = f"n{len(notes) + 1}"
        notes[note_id] = text
        return f"stored {note_id}"

    @app.tool(annotations=types.ToolAnnotations(destructive_hint=True))
    def delete_note(note_id: str, ctx: Context) -> str:
        """Delete a note."""
        record(ctx, "delete_note", {"note_id": note_id})
        return "deleted" if notes.pop(note_id, None) is not None else f"no note {note_id}"

    @app.tool(annotations=types.ToolAnnotations(idempotent_hint=True))
    def tag_note(note_id: str, tag: str, ctx: Context) -> str:
        """Tag a note (tagging twice changes nothing more)."""
        record(ctx, "tag_note", {"note_id": note_id, "tag": tag})
        return f"tagged {note_id} {tag}"

    @app.tool(annotations=READ_ONLY)
    def seen_key(ctx: Context) -> str:
        """The idempotency key this call carried in _meta."""
        return key(ctx) or "(no key)"

    @app.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails, saying why."""
        raise ToolError(f"failed on purpose: {reason}")

    @app.tool(annotations=READ_ONLY)
    async def wait(seconds: float) -> str:
        """Answer after some seconds (a hung server, for long enough)."""
        await anyio.sleep(seconds)
        return f"waited {seconds}"

    @app.tool()
    async def slow_note(text: str, seconds: float, ctx: Context) -> str:
        """Store a note after a wait; the ledger line is written before the wait
        (`NOTES_SLOW` in the environment, when set, is the wait instead)."""
        record(ctx, "slow_note", {"text": text})
        await anyio.sleep(float(os.environ.get("NOTES_SLOW", seconds)))
        return f"stored {text}"

    @app.tool(annotations=READ_ONLY)
    def header(name: str, ctx: Context) -> str:
        """The value of a request header (over HTTP)."""
        return (ctx.headers or {}).get(name.lower(), "(none)")

    @app.tool(annotations=READ_ONLY)
    def repeat(text: str, times: int) -> str:
        """The text, many times (a long output)."""
        return text * times

    @app.tool(annotations=READ_ONLY)
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @app.tool(annotations=READ_ONLY)
    def picture() -> list[types.ContentBlock]:
        """A caption, an image and an embedded resource."""
        return [
            types.TextContent(text="a caption"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="note://n1", text="the note")
            ),
        ]

    @app.tool(annotations=READ_ONLY, structured_output=True)
    def stats() -> dict[str, int]:
        """Counts, as structured content."""
        return {"notes": len(notes), "tags": 0}

    @app.tool(annotations=READ_ONLY)
    def refused() -> str:
        """Answered by the middleware `garbled` with a protocol error."""
        return "never sent"

    @app.tool(annotations=READ_ONLY)
    def garbage() -> str:
        """Answered by the middleware `garbled` with a malformed result."""
        return "never sent"

    app.add_tool(
        lambda: len(notes), name="notes.count", description="How many notes.", annotations=READ_ONLY
    )

    async def changed(ctx: Context) -> None:
        """Tell the client the tools changed, and wait until it has listed them again."""
        app.listed = anyio.Event()
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        with anyio.move_on_after(5):
            await app.listed.wait()

    @app.tool(annotations=READ_ONLY)
    async def grow(tool_name: str, ctx: Context) -> str:
        """Add a tool that answers with its own name."""
        app.add_tool(lambda: f"I am {tool_name}", name=tool_name, annotations=READ_ONLY)
        await changed(ctx)
        return f"added {tool_name}"

    @app.tool(annotations=READ_ONLY)
    async def shrink(tool_name: str, ctx: Context) -> str:
        """Remove a tool."""
        app.remove_tool(tool_name)
        await changed(ctx)
        return f"removed {tool_name}"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="notes")
    parser.add_argument("--http", type=int, default=None)
    options = parser.parse_args()
    app = build(options.name)
    if options.http is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
