"""`agentloops.mcp.serve`: our tools, and a whole loop, served over MCP and used from our own
MCPToolset (stdio and streamable HTTP); what cannot be served is a ConfigurationError."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator

import pytest
from _mcp_helpers import PYTHON, SERVERS, free_port, wait_for_port
from mcp import Client

from agentloops import ConfigurationError, ReActLoop, ToolRegistry, tool
from agentloops.engine.effects import call_key
from agentloops.mcp import MCPToolset, mcp_server, serve
from agentloops.testing import ScriptedModel, use_tools

SERVED = str(SERVERS / "served.py")


@pytest.fixture(scope="module")
def ours() -> Iterator[MCPToolset]:
    with MCPToolset.stdio(PYTHON, [SERVED, "tools"]) as toolset:
        yield toolset


def test_our_tools_round_trip_with_their_schemas_and_annotations(ours: MCPToolset) -> None:
    assert ours.name == "our-tools"
    tools = {t.name: t for t in ours.tools()}
    assert list(tools) == ["add", "whoami", "boom", "bump"]
    assert tools["add"].description == "Add two integers."
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert (tools["add"].read_only, tools["add"].requires_approval) == (True, False)
    # Not read-only but safe to run again: listed as idempotent, so it reruns in doubt here.
    assert (tools["bump"].read_only, tools["bump"].on_doubt) == (False, "rerun")
    registry = ToolRegistry([ours])
    assert registry.call("add", {"a": 2, "b": 40}).content == "42"
    boom = registry.call("boom", {"why": "out of paper"})
    assert boom.is_error and boom.content == "'boom' failed: RuntimeError: out of paper"


def test_the_callers_idempotency_key_is_the_served_tools_key(ours: MCPToolset) -> None:
    model = ScriptedModel([use_tools(("whoami", {})), "ok"])
    result = ReActLoop(model, [ours]).run("Who?", run_id="r-9")
    (call,) = result.messages[1].tool_calls
    assert result.messages[2].content[0].content == call_key("r-9", call.id)


def test_a_loop_served_over_http_is_one_tool_task_in_answer_out() -> None:
    port = free_port()
    env = dict(os.environ)
    process = subprocess.Popen(
        [PYTHON, SERVED, "loop", "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        with MCPToolset.http(f"http://127.0.0.1:{port}/mcp") as agent:
            (only,) = agent.tools()
            assert only.name == "our-loop" and only.input_schema["required"] == ["task"]
            registry = ToolRegistry([agent])
            assert registry.call("our-loop", {"task": "add 20 and 22"}).content == "The sum is 42."
            stopped = registry.call("our-loop", {"task": "add nothing"})
            assert stopped.is_error
            assert stopped.content.startswith("the run stopped without an answer (max_tokens")
            assert stopped.content.endswith("I need two numbers")
            refused = registry.call("our-loop", {"task": " "})
            assert refused.is_error and "a non-empty string is required" in refused.content
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_tools_that_need_approval_are_served_only_if_the_client_asks() -> None:
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    with pytest.raises(ConfigurationError, match=r"tools \['pay'\] need a human's approval"):
        mcp_server([pay])

    async def listed() -> list[str]:
        async with Client(mcp_server([pay], client_approves=True), cache=None) as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool("pay", {"amount": 3})
            assert result.content[0].text == "paid 3"  # type: ignore[union-attr]
            return [f"{t.name}:{t.annotations.read_only_hint}" for t in tools]  # type: ignore[union-attr]

    assert asyncio.run(listed()) == ["pay:True"]


def test_the_served_registry_checks_what_any_client_sends() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def calls() -> list[tuple[str, bool]]:
        async with Client(mcp_server([add]), cache=None) as client:
            results = [
                await client.call_tool("add", {"a": "x", "b": 1}),
                await client.call_tool("sub", {}),
            ]
        return [(r.content[0].text, r.is_error) for r in results]  # type: ignore[union-attr]

    assert asyncio.run(calls()) == [
        (
            "invalid arguments for 'add': a: Input should be a valid integer, unable to parse "
            "string as an integer (got 'x')",
            True,
        ),
        ("unknown tool 'sub'; available tools: add", True),
    ]


def test_what_cannot_be_served_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="takes a ToolRegistry, tools, or a loop"):
        mcp_server(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="transport must be 'stdio' or 'http'"):
        serve([], transport="sse")  # type: ignore[arg-type]


def test_a_served_loop_answers_says_why_it_did_not_and_reports_a_failed_run() -> None:
    @tool
    def look(place: str) -> str:
        """Look a place up."""
        return f"{place} is far"

    answering = ReActLoop(ScriptedModel(["Paris."]), [])
    looping = ReActLoop(ScriptedModel([use_tools(("look", {"place": "Oz"}))]), [look], max_steps=1)
    failing = ReActLoop(ScriptedModel([RuntimeError("the model is down")]), [])

    async def ask(loop: ReActLoop, tool_name: str, task: str) -> tuple[str, bool]:
        server = mcp_server(loop, name="geo", description="Answers geography questions.")
        async with Client(server, cache=None) as client:
            (listed,) = (await client.list_tools()).tools
            assert (listed.name, listed.description) == ("geo", "Answers geography questions.")
            result = await client.call_tool(tool_name, {"task": task})
        return result.content[0].text, result.is_error  # type: ignore[union-attr]

    assert asyncio.run(ask(answering, "geo", "Capital of France?")) == ("Paris.", False)
    assert asyncio.run(ask(answering, "atlas", "x")) == (
        "unknown tool 'atlas'; this server has 'geo'",
        True,
    )
    text, is_error = asyncio.run(ask(looping, "geo", "Where is Oz?"))
    assert is_error and text == (
        "the run stopped without an answer (max_steps: max_steps=1 reached after 1 steps)"
    )
    text, is_error = asyncio.run(ask(failing, "geo", "Anything?"))
    assert is_error and text.startswith("the run failed: ") and "the model is down" in text
