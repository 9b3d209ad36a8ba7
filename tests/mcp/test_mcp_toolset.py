"""MCPToolset against real servers: listing and schemas, annotations, calls and results,
and every way a server can fail a call (refuse, die mid-call, hang, answer garbage)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from _mcp_helpers import (
    PYTHON,
    SERVERS,
    Served,
    free_port,
    notes_toolset,
    wait_for_port,
)

from agentloops import ConfigurationError, ReActLoop, ToolRegistry, tool
from agentloops.mcp import MCPConnectionError, MCPTool, MCPToolset
from agentloops.testing import ScriptedModel, use_tools


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def test_the_tools_come_with_the_servers_schemas_and_descriptions(notes: Served) -> None:
    registry = ToolRegistry([mul, notes.toolset])
    names = [spec.name for spec in registry.specs()]
    assert names[0] == "mul"
    assert {"add", "search_notes", "filtered", "add_note", "picture"} <= set(names[1:])
    spec = {s.name: s for s in registry.specs()}["filtered"]
    assert spec.description == "Count notes under a filter (a nested schema, for argument checks)."
    schema = spec.input_schema
    assert schema["required"] == ["filter", "count"]
    assert schema["$defs"]["Filter"]["properties"]["level"]["enum"] == ["low", "high"]
    assert registry.get("add").input_schema["properties"]["a"]["type"] == "integer"  # type: ignore[union-attr]


def test_a_name_a_provider_would_refuse_is_made_fit_and_called_by_its_own(notes: Served) -> None:
    registry = ToolRegistry([notes.toolset])
    assert "notes.count" not in registry
    counted = registry.get("notes_count")
    assert isinstance(counted, MCPTool) and counted.server_name == "notes.count"
    outcome = registry.call("notes_count", {})
    assert (outcome.content, outcome.is_error) == ("0", False)  # nothing stored in this module


def test_annotations_set_read_only_approval_and_calls_in_doubt(notes: Served) -> None:
    tools = {t.name: t for t in notes.toolset.tools()}
    add, add_note, delete, tag = (
        tools["add"],
        tools["add_note"],
        tools["delete_note"],
        tools["tag_note"],
    )
    assert (add.read_only, add.requires_approval, add.on_doubt) == (True, False, "rerun")
    # No annotations: the spec's defaults (not read-only, may destroy): ask first.
    assert (add_note.read_only, add_note.requires_approval, add_note.on_doubt) == (
        False,
        True,
        "ask",
    )
    assert (delete.read_only, delete.requires_approval, delete.on_doubt) == (False, True, "ask")
    # Idempotent: asks before it runs, but a call in doubt may simply run again.
    assert (tag.requires_approval, tag.on_doubt) == (True, "rerun")
    assert isinstance(add, MCPTool) and add.server_name == "add"
    assert add.annotations.read_only_hint is True


def test_a_call_returns_the_servers_answer_and_plain_tools_run_beside(notes: Served) -> None:
    model = ScriptedModel(
        [use_tools(("add", {"a": 2, "b": 3}), ("mul", {"a": 4, "b": 5})), "9 and 20"]
    )
    result = ReActLoop(model, [mul, notes.toolset]).run("Add and multiply.")
    results = result.messages[2].content
    assert [(r.content, r.is_error) for r in results] == [("5", False), ("20", False)]  # type: ignore[union-attr]
    assert result.answer == "9 and 20"


def test_arguments_are_checked_against_the_schema_before_the_call(notes: Served) -> None:
    registry = ToolRegistry([notes.toolset])
    bad = registry.call("filtered", {"filter": {"tag": 1, "level": "mid"}})
    assert bad.is_error
    assert bad.content == (
        "invalid arguments for 'filtered': count: Field required; "
        "filter.level: should be one of 'low' or 'high' (got 'mid'); "
        "filter.tag: should be of type 'string' (got 1)"
    )
    before = notes.lines()
    refused = registry.call("add_note", {"text": 42})
    assert refused.is_error and "text: should be of type 'string' (got 42)" in refused.content
    assert notes.lines() == before  # the server never saw it
    good = registry.call("filtered", {"filter": {"tag": "work"}, "count": 3})
    assert (good.content, good.is_error) == ("3 notes tagged work at low", False)


def test_results_join_text_show_structured_content_and_name_other_blocks(notes: Served) -> None:
    registry = ToolRegistry([notes.toolset])
    picture = registry.call("picture", {})
    assert not picture.is_error
    assert picture.content == (
        "a caption\n[image: image/png, 32 bytes; not shown]\n[resource <note://n1>]\nthe note"
    )
    stats = registry.call("stats", {})
    assert stats.content.replace(" ", "").replace("\n", "") == '{"notes":0,"tags":0}'


def test_an_over_long_answer_is_cut_like_any_tools_output(notes: Served) -> None:
    outcome = ToolRegistry([notes.toolset], max_output_chars=300).call(
        "repeat", {"text": "ab", "times": 1000}
    )
    assert outcome.is_error and len(outcome.content) <= 300
    assert outcome.content.startswith("abab") and outcome.content.endswith("abab")
    assert "[... output too long: " in outcome.content


def test_a_failing_tool_is_an_error_result_with_the_servers_words(notes: Served) -> None:
    outcome = ToolRegistry([notes.toolset]).call("fail", {"reason": "no disk"})
    assert outcome.is_error
    assert outcome.content == "Error executing tool fail: failed on purpose: no disk"


def test_a_protocol_error_is_an_error_result_naming_the_server(notes: Served) -> None:
    outcome = ToolRegistry([notes.toolset]).call("refused", {})
    assert outcome.is_error
    assert outcome.content == (
        "MCP server 'notes', tool 'refused': the server refused the call: "
        "refused: this server is read-only today"
    )


def test_a_garbage_answer_is_an_error_result_naming_the_server(notes: Served) -> None:
    outcome = ToolRegistry([notes.toolset]).call("garbage", {})
    assert outcome.is_error
    assert outcome.content.startswith(
        "MCP server 'notes', tool 'garbage': the server's answer is not a valid result"
    )
    assert ToolRegistry([notes.toolset]).call("add", {"a": 1, "b": 1}).content == "2"


def test_a_hung_call_is_cancelled_at_its_timeout_and_the_server_serves_on(notes: Served) -> None:
    registry = ToolRegistry([notes.toolset])
    start = time.perf_counter()
    outcome = registry.call("wait", {"seconds": 60})
    assert time.perf_counter() - start < 10
    assert outcome.is_error
    assert outcome.content.startswith(
        "MCP server 'notes', tool 'wait': no answer within 1.0 s; the call was cancelled"
    )
    assert registry.call("add", {"a": 20, "b": 22}).content == "42"


def test_a_server_killed_mid_call_is_an_error_result_and_so_is_every_later_call(
    tmp_path: Path,
) -> None:
    toolset = notes_toolset(tmp_path / "ledger.jsonl")
    with toolset:
        registry = ToolRegistry([toolset])
        pid = int(registry.call("pid", {}).content)
        outcome: list[object] = []
        call = threading.Thread(
            target=lambda: outcome.append(registry.call("wait", {"seconds": 60}))
        )
        call.start()
        time.sleep(0.5)  # the call is in flight
        os.kill(pid, signal.SIGKILL)
        call.join(timeout=30)
        assert not call.is_alive()
        (killed,) = outcome
        assert killed.is_error  # type: ignore[attr-defined]
        assert killed.content.startswith("MCP server 'notes', tool 'wait': ")  # type: ignore[attr-defined]
        later = registry.call("add", {"a": 1, "b": 2})
        assert later.is_error and later.content.startswith("MCP server 'notes', tool 'add': ")
    assert not toolset.is_open  # closing a dead server's toolset does not raise


def test_an_http_server_that_dies_loses_the_session_and_later_calls_are_not_made() -> None:
    port = free_port()
    server = subprocess.Popen(
        [PYTHON, str(SERVERS / "notes.py"), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        with MCPToolset.http(f"http://127.0.0.1:{port}/mcp", timeout=5) as toolset:
            registry = ToolRegistry([toolset])
            assert registry.call("add", {"a": 1, "b": 2}).content == "3"
            server.kill()
            server.wait()
            outcomes = [registry.call("add", {"a": 1, "b": 2})]
            deadline = time.monotonic() + 10
            while "not called" not in outcomes[-1].content and time.monotonic() < deadline:
                time.sleep(0.1)
                outcomes.append(registry.call("add", {"a": 1, "b": 2}))
            assert all(o.is_error for o in outcomes)
            assert all(o.content.startswith("MCP server 'notes', tool 'add': ") for o in outcomes)
            assert outcomes[-1].content.startswith(
                "MCP server 'notes', tool 'add': not called, the connection was lost: "
            )
    finally:
        server.kill()
        server.wait()


def test_a_toolset_that_is_not_open_has_no_tools_and_its_tools_say_so(tmp_path: Path) -> None:
    toolset = notes_toolset(tmp_path / "ledger.jsonl", name="later")
    registry = ToolRegistry([mul, toolset])
    assert registry.names == ["mul"]
    with toolset:
        assert "add" in registry
        kept = registry.get("add")
        assert registry.call("add", {"a": 1, "b": 1}).content == "2"
        assert repr(toolset).startswith("MCPToolset('later', open, ")
    assert registry.names == ["mul"]
    assert isinstance(kept, MCPTool)
    outcome = kept.fn(a=1, b=1)
    assert outcome.is_error
    assert outcome.content == "MCP server 'later' is not open: call 'add' inside `with`"


def test_two_servers_with_the_same_tools_clash_unless_one_has_a_prefix(notes: Served) -> None:
    with MCPToolset.stdio(PYTHON, [str(SERVERS / "notes.py"), "--name", "other"]) as other:
        with pytest.raises(ConfigurationError) as clash:
            ToolRegistry([notes.toolset, other])
        assert "tool name 'add' is offered by MCP server 'notes' and by MCP server 'other'" in str(
            clash.value
        )

        def add(a: int, b: int) -> int:
            return a - b

        with pytest.raises(
            ConfigurationError,
            match="'add' is offered by a tool registered directly and by MCP server 'other'",
        ):
            ToolRegistry([add, other])
    with MCPToolset.stdio(PYTHON, [str(SERVERS / "notes.py")], prefix="o") as prefixed:
        registry = ToolRegistry([notes.toolset, prefixed])
        assert "o_add" in registry and "add" in registry
        assert registry.call("o_add", {"a": 1, "b": 2}).content == "3"
        assert registry.get("o_add").server_name == "add"  # type: ignore[union-attr]


def test_a_server_with_300_tools_lists_and_calls_them_all() -> None:
    with MCPToolset.stdio(PYTHON, [str(SERVERS / "many.py")]) as many:
        registry = ToolRegistry([many])
        assert len(registry) == 300
        assert registry.names[0] == "tool_000" and registry.names[-1] == "tool_299"
        model = ScriptedModel([use_tools(("tool_299", {"x": 1}), ("tool_007", {"x": 1})), "ok"])
        result = ReActLoop(model, registry).run("Use two of them.")
        assert len(model.requests[0].tools) == 300
        assert [r.content for r in result.messages[2].content] == ["300", "8"]  # type: ignore[union-attr]


def test_settings_naming_tools_the_server_does_not_list_are_refused(tmp_path: Path) -> None:
    toolset = notes_toolset(tmp_path / "l.jsonl", timeout={"wiat": 5}, on_doubt={"ad": "fail"})
    with pytest.raises(ConfigurationError, match="lists no tool 'ad', 'wiat'; it lists: add, "):
        toolset.__enter__()
    assert not toolset.is_open


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prefix": "a b"}, "prefix must match"),
        ({"requires_approval": "add_note"}, "requires_approval must be"),
        ({"requires_approval": 3}, "requires_approval must be"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"timeout": {"add": -1}}, "timeout must be > 0"),
        ({"on_doubt": "retry"}, "on_doubt must be"),
        ({"on_doubt": {"add": "maybe"}}, "on_doubt must be"),
        ({"connect_timeout": 0}, "connect_timeout must be > 0"),
    ],
)
def test_bad_options_are_a_configuration_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MCPToolset.stdio(PYTHON, ["server.py"], **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["-c", "import sys; sys.exit(3)"], "could not be opened: "),
        (["-c", "import sys; sys.stdin.read()"], "no handshake within connect_timeout=1.0 s"),
    ],
)
def test_a_server_that_does_not_start_is_an_mcp_connection_error(args: list[str], why: str) -> None:
    toolset = MCPToolset.stdio(PYTHON, args, name="broken", connect_timeout=1.0)
    with pytest.raises(MCPConnectionError, match="MCP server 'broken' .*" + why):
        toolset.__enter__()
    assert not toolset.is_open and toolset.tools() == ()


def test_cancelling_an_async_open_cancels_it_and_leaves_the_toolset_closed() -> None:
    silent = MCPToolset.stdio(PYTHON, ["-c", "import sys; sys.stdin.read()"], name="silent")

    async def opened_with_a_deadline() -> None:
        await asyncio.wait_for(silent.__aenter__(), 0.5)

    with pytest.raises(asyncio.TimeoutError):  # the cancellation, not an MCPConnectionError
        asyncio.run(opened_with_a_deadline())
    assert not silent.is_open and silent.tools() == ()


def test_a_command_that_does_not_exist_is_an_mcp_connection_error() -> None:
    with pytest.raises(MCPConnectionError, match="could not be opened"):
        MCPToolset.stdio("/nonexistent/mcp-server").__enter__()


def test_a_toolset_opens_once_at_a_time(notes: Served) -> None:
    with pytest.raises(ConfigurationError, match="MCP server 'notes' is already open"):
        notes.toolset.__enter__()
    assert notes.toolset.is_open
