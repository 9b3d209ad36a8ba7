"""Per-call cost of an MCP tool over stdio: agentloops beside a plain tool, the SDK's own
client, and pydantic-ai's MCP toolset, all on the same server (bench/mcp_server.py).

Each contender makes N calls of the server's `add` tool; per call = wall time / N (wall
time, not CPU time: the server process and the pipe are part of the cost). Rounds are
interleaved so machine noise hits every contender alike; the table gives the median round.
In-loop rows run an agent of N tool steps then an answer, over a zero-latency model, once
with the MCP tool and once with a plain tool: their difference is what an MCP call adds to
a step of that framework's loop.

    python bench/mcp_overhead.py            # N=200, 7 rounds
    python bench/mcp_overhead.py --quick    # N=50, 3 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from machine import describe
from peers import versions

from agentloops import (
    Message,
    ModelRequest,
    ModelResponse,
    ReActLoop,
    Text,
    ToolCall,
    Usage,
    tool,
)
from agentloops.mcp import MCPToolset

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "mcp_server.py")]
Timed = Callable[[int], Awaitable[float]]


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


class Replies:
    """A zero-latency `ModelClient`: N calls of `add`, then an answer."""

    def __init__(self, steps: int):
        usage = Usage(input_tokens=10, output_tokens=5)
        self._next = iter(
            [
                ModelResponse(
                    Message("assistant", (ToolCall(f"c{i}", "add", {"a": i, "b": 1}),)),
                    "tool_use",
                    usage,
                )
                for i in range(steps)
            ]
            + [ModelResponse(Message("assistant", (Text("done"),)), "end_turn", usage)]
        ).__next__

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self._next()

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        return self._next()


async def timed(fn: Callable[[], Awaitable[object]] | Callable[[], object]) -> float:
    start = time.perf_counter()
    out = fn()
    if asyncio.iscoroutine(out):
        await out
    return time.perf_counter() - start


def in_thread(fn: Callable[[], object]) -> Callable[[], Awaitable[object]]:
    return lambda: asyncio.to_thread(fn)


async def main(n: int, rounds: int) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    rows: dict[str, list[float]] = {}
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    synced = MCPToolset.stdio(SERVER[0], SERVER[1:], name="bench")
    here = MCPToolset.stdio(SERVER[0], SERVER[1:], name="bench")
    pai, pai_error = await pydantic_ai_contender(n)
    async with Client(params, cache=None) as client, here:
        with synced:  # its own event loop thread, as a sync run uses it
            sync_registry = ReActLoop(Replies(0), [synced]).tools
            async_registry = ReActLoop(Replies(0), [here]).tools
            plain_registry = ReActLoop(Replies(0), [add]).tools

            async def sdk() -> None:
                for i in range(n):
                    await client.call_tool("add", {"a": i, "b": 1})

            def ours_sync() -> None:
                for i in range(n):
                    sync_registry.call("add", {"a": i, "b": 1})

            async def ours_async() -> None:
                for i in range(n):
                    await async_registry.acall("add", {"a": i, "b": 1})

            def plain() -> None:
                for i in range(n):
                    plain_registry.call("add", {"a": i, "b": 1})

            def react(tools: list[Any]) -> Callable[[], object]:
                return lambda: ReActLoop(Replies(n), tools, max_steps=n + 1).run("go")

            def areact(tools: list[Any]) -> Callable[[], Awaitable[object]]:
                return lambda: ReActLoop(Replies(n), tools, max_steps=n + 1).arun("go")

            contenders: dict[str, Callable[[], Any]] = {
                "SDK `Client.call_tool` (the floor)": sdk,
                "agentloops `ToolRegistry.call`, MCP tool (`with`, from a thread)": in_thread(
                    ours_sync
                ),
                "agentloops `ToolRegistry.acall`, MCP tool (`async with`)": ours_async,
                "agentloops `ToolRegistry.call`, plain tool": plain,
                "agentloops ReAct `run` step, MCP tool": in_thread(react([synced])),
                "agentloops ReAct `run` step, plain tool": in_thread(react([add])),
                "agentloops ReAct `arun` step, MCP tool (`async with`)": areact([here]),
                "agentloops ReAct `arun` step, plain tool": areact([add]),
            }
            if pai is not None:
                contenders.update(pai)
            for _ in range(rounds):
                for label, fn in contenders.items():
                    rows.setdefault(label, []).append(await timed(fn) / n * 1e6)
    await close_pydantic_ai()
    report(rows, n, rounds, pai_error)


_PAI: dict[str, Any] = {}


async def pydantic_ai_contender(n: int) -> tuple[dict[str, Callable[[], Any]] | None, str]:
    """pydantic-ai's `MCPToolset` on the same server, in an Agent over its FunctionModel."""
    try:
        from fastmcp.client.transports import StdioTransport
        from pydantic_ai import Agent, UsageLimits
        from pydantic_ai.mcp import MCPToolset as PydanticMCP
        from pydantic_ai.messages import ModelResponse as PaiResponse
        from pydantic_ai.messages import TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
    except Exception as exc:  # not installed, or not working with this mcp
        return None, f"{type(exc).__name__}: {exc}"
    toolset = PydanticMCP(StdioTransport(command=SERVER[0], args=SERVER[1:]))
    try:
        await toolset.__aenter__()
    except Exception as exc:  # FastMCP's connect gives up early on a loaded machine
        return None, f"{type(exc).__name__}: {exc}"
    _PAI["toolset"] = toolset
    limits = UsageLimits(request_limit=None)

    def agent(tools: list[Any], toolsets: list[Any]) -> Any:
        def reply(messages: Any, info: Any) -> Any:
            step = sum(1 for m in messages if getattr(m, "kind", "") == "response")
            if step < n:
                call = ToolCallPart("add", {"a": step, "b": 1}, tool_call_id=f"c{step}")
                return PaiResponse(parts=[call])
            return PaiResponse(parts=[TextPart("done")])

        return Agent(FunctionModel(reply), tools=tools, toolsets=toolsets)

    with_mcp, with_plain = agent([], [toolset]), agent([add.fn], [])

    async def mcp_run() -> None:
        out = await with_mcp.run("go", usage_limits=limits)
        assert out.output == "done", out.output

    async def plain_run() -> None:
        out = await with_plain.run("go", usage_limits=limits)
        assert out.output == "done", out.output

    await mcp_run()  # the first run lists the tools
    return {
        "pydantic-ai Agent step, `MCPToolset`": mcp_run,
        "pydantic-ai Agent step, plain tool": plain_run,
    }, ""


async def close_pydantic_ai() -> None:
    toolset = _PAI.pop("toolset", None)
    if toolset is not None:
        await toolset.__aexit__(None, None, None)


def report(rows: dict[str, list[float]], n: int, rounds: int, pai_error: str) -> None:
    median = {label: statistics.median(values) for label, values in rows.items()}
    spread = {label: (min(v), max(v)) for label, v in rows.items()}
    print("# MCP tool calls over stdio: cost per call")
    print()
    print(describe())
    print(f"mcp {versions_of('mcp')}; pydantic-ai {versions('pydantic-ai')}")
    print(f"{n} calls per round, {rounds} rounds interleaved; median round (min to max), us")
    print()
    print("| contender | us per call | min to max |")
    print("|---|---:|---:|")
    for label, value in median.items():
        low, high = spread[label]
        print(f"| {label} | {value:,.0f} | {low:,.0f} to {high:,.0f} |")
    print()
    floor = median["SDK `Client.call_tool` (the floor)"]
    sync = median["agentloops `ToolRegistry.call`, MCP tool (`with`, from a thread)"]
    asyn = median["agentloops `ToolRegistry.acall`, MCP tool (`async with`)"]
    ours = median["agentloops ReAct `run` step, MCP tool"]
    ours_plain = median["agentloops ReAct `run` step, plain tool"]
    print(
        f"- agentloops over the SDK floor: {sync - floor:+,.0f} us a call from a thread "
        f"(x{sync / floor:.2f}), {asyn - floor:+,.0f} us awaited (x{asyn / floor:.2f})"
    )
    print(f"- what an MCP call adds to a ReAct step: {ours - ours_plain:,.0f} us")
    if "pydantic-ai Agent step, `MCPToolset`" in median:
        theirs = median["pydantic-ai Agent step, `MCPToolset`"]
        theirs_plain = median["pydantic-ai Agent step, plain tool"]
        print(f"- what an MCP call adds to a pydantic-ai step: {theirs - theirs_plain:,.0f} us")
        print(f"- a step with an MCP tool, pydantic-ai / agentloops: x{theirs / ours:.2f}")
    else:
        print(f"- pydantic-ai's MCP toolset did not run: {pai_error}")


def versions_of(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=50, 3 rounds")
    args = parser.parse_args()
    asyncio.run(main(50 if args.quick else 200, 3 if args.quick else 7))
