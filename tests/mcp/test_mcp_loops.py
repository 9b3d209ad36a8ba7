"""MCP tools in every loop, under the sync driver and the asyncio driver: ReAct, ReWOO (the
planner sees the server's tools, the worker calls them) and Plan-and-Execute steps; approval
of a tool the annotations leave unmarked; the idempotency key each call carries in `_meta`;
`async with` on the caller's loop; streamable HTTP with headers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _mcp_helpers import HTTPServer, Served, notes_toolset

from agentloops import (
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    ToolCall,
    ToolRegistry,
    tool,
)
from agentloops.engine.effects import call_key
from agentloops.mcp import MCPToolset
from agentloops.testing import ScriptedModel, respond_structured, use_tools

Drive = Callable[[Any, str], Any]


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def sync(loop: Any, task: str) -> Any:
    return loop.run(task)


def in_asyncio(loop: Any, task: str) -> Any:
    return asyncio.run(loop.arun(task))


DRIVERS = pytest.mark.parametrize("drive", [sync, in_asyncio], ids=["run", "arun"])


@DRIVERS
def test_react_calls_mcp_tools_beside_plain_ones(notes: Served, drive: Drive) -> None:
    model = ScriptedModel(
        [
            use_tools(("add", {"a": 19, "b": 23}), ("shout", {"text": "hi"})),
            use_tools(("search_notes", {"query": "zebra"})),
            "42, HI, and no zebra notes.",
        ]
    )
    result = drive(ReActLoop(model, [shout, notes.toolset]), "Work it out.")
    assert result.stop_reason == "answered"
    turn_1, turn_2 = result.messages[2].content, result.messages[4].content
    assert [(r.content, r.is_error) for r in turn_1] == [("42", False), ("HI", False)]
    assert turn_2[0].content == "no notes match"
    assert {t.name for t in model.requests[0].tools} >= {"shout", "add", "search_notes"}


@DRIVERS
def test_rewoo_plans_with_the_servers_tools_and_the_worker_calls_them(
    notes: Served, drive: Drive
) -> None:
    plan = {
        "steps": [
            {
                "step_id": "#E1",
                "description": "add",
                "tool_name": "add",
                "tool_args": {"a": 2, "b": 3},
            },
            {
                "step_id": "#E2",
                "description": "shout",
                "tool_name": "shout",
                "tool_args": {"text": "sum #E1"},
            },
            {
                "step_id": "#E3",
                "description": "filter",
                "tool_name": "filtered",
                "tool_args": {"filter": {"tag": "t"}, "count": "#E1"},
            },
        ]
    }
    planner = ScriptedModel([respond_structured(plan), "The sum is 5."])
    result = drive(ReWOOPipeline(planner, [shout, notes.toolset]), "Add 2 and 3.")
    system = planner.requests[0].system
    assert "- add: Add two integers." in system and "- filtered: Count notes" in system
    assert "add_note" not in system  # it asks for approval, which the worker cannot do
    assert {sid: o.content for sid, o in result.evidence.items()} == {
        "#E1": "5",
        "#E2": "SUM 5",
        "#E3": "5 notes tagged t at low",
    }
    assert result.answer == "The sum is 5."


@DRIVERS
def test_plan_and_execute_steps_call_mcp_tools(notes: Served, drive: Drive) -> None:
    steps = [{"step_number": 1, "description": "Add 1 and 2."}]
    steps.append({"step_number": 2, "description": "Shout the sum."})
    model = ScriptedModel(
        [
            respond_structured({"steps": steps}),
            use_tools(("add", {"a": 1, "b": 2})),
            "The sum is 3.",
            use_tools(("shout", {"text": "three"})),
            "THREE",
            "3, shouted: THREE.",
        ]
    )
    result = drive(PlanAndExecute(model, [shout, notes.toolset]), "Add and shout.")
    assert result.step_results == ["The sum is 3.", "THREE"]
    assert result.answer == "3, shouted: THREE."
    after_the_call = model.requests[2]  # step 1's second model call sees the server's answer
    assert after_the_call.messages[-1].content[0].content == "3"  # type: ignore[union-attr]


@DRIVERS
def test_a_tool_not_marked_read_only_waits_for_approval_and_runs_once(
    notes: Served, drive: Drive
) -> None:
    model = ScriptedModel([use_tools(("add_note", {"text": "buy milk"})), "Stored."])
    loop = ReActLoop(model, [notes.toolset])
    before = len(notes.lines())
    paused = drive(loop, "Remember to buy milk.")
    assert paused.stop_reason == "approval_required"
    (pending,) = paused.pending_approvals
    assert pending.name == "add_note" and len(notes.lines()) == before  # not run yet
    done = loop.resume(paused, {pending.id: True})
    assert done.answer == "Stored."
    assert done.messages[2].content[0].content.startswith("stored n")
    added = notes.lines()[before:]
    assert [line["tool"] for line in added] == ["add_note"]


def test_a_predicate_asks_for_the_arguments_it_names_and_a_denying_policy_still_wins(
    tmp_path: Any,
) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def big(name: str, args: dict[str, Any]) -> bool:
        asked.append((name, args))
        return name == "add" and args["a"] > 100

    def policy(call: ToolCall) -> str:
        return "deny" if call.name == "delete_note" else "allow"

    with notes_toolset(tmp_path / "l.jsonl", requires_approval=big) as ts:
        model = ScriptedModel(
            [
                use_tools(("add", {"a": 1, "b": 1}), ("delete_note", {"note_id": "n1"})),
                use_tools(("add", {"a": 500, "b": 1})),
                "x",
            ]
        )
        result = ReActLoop(model, [ts], approval=policy).run("Add.")  # type: ignore[arg-type]
        small, denied = result.messages[2].content
        assert (small.content, small.is_error) == ("2", False)
        assert denied.is_error and "denied" in denied.content
        assert not (tmp_path / "l.jsonl").exists()  # the server never saw the delete
        assert result.stop_reason == "approval_required"
        assert result.pending_approvals[0].args == {"a": 500, "b": 1}
        assert ("add", {"a": 500, "b": 1}) in asked


@DRIVERS
def test_each_call_carries_its_idempotency_key_in_meta(notes: Served, drive: Drive) -> None:
    model = ScriptedModel([use_tools(("seen_key", {}), ("seen_key", {})), "ok"])
    loop = ReActLoop(model, [notes.toolset])
    if drive is sync:
        result = loop.run("Which keys?", run_id="run-7")
    else:
        result = asyncio.run(loop.arun("Which keys?", run_id="run-7"))
    calls = result.messages[1].tool_calls
    seen = [r.content for r in result.messages[2].content]
    assert seen == [call_key("run-7", c.id) for c in calls]
    assert seen[0] != seen[1]


def test_async_with_keeps_the_session_on_the_callers_loop_and_with_works_there_too(
    tmp_path: Any,
) -> None:
    async def main() -> None:
        async with notes_toolset(tmp_path / "l.jsonl", name="here") as ts:
            model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2})), "3"])
            result = await ReActLoop(model, [ts]).arun("Add.")
            assert result.messages[2].content[0].content == "3"
            # A sync run on this loop's thread would wait for itself: an error result.
            blocked = ToolRegistry([ts]).call("add", {"a": 1, "b": 2})
            assert blocked.is_error and "opened with `async with`" in blocked.content
            # From another thread the session is reached across.
            model = ScriptedModel([use_tools(("add", {"a": 2, "b": 2})), "4"])
            threaded = await asyncio.to_thread(ReActLoop(model, [ts]).run, "Add.")
            assert threaded.messages[2].content[0].content == "4"
        assert not ts.is_open
        # `with` inside async code: the session gets its own loop, opened and closed here.
        with notes_toolset(tmp_path / "l.jsonl", name="own") as own:
            model = ScriptedModel([use_tools(("add", {"a": 3, "b": 3})), "6"])
            result = await ReActLoop(model, [own]).arun("Add.")
            assert result.messages[2].content[0].content == "6"
        assert not own.is_open

    asyncio.run(main())


def test_a_toolset_opened_with_with_serves_arun_on_any_loop(notes: Served) -> None:
    async def two_runs() -> list[str]:
        runs: list[Awaitable[Any]] = []
        for a in (1, 2):
            model = ScriptedModel([use_tools(("add", {"a": a, "b": 10})), "ok"])
            runs.append(ReActLoop(model, [notes.toolset]).arun("Add."))
        results = await asyncio.gather(*runs)
        return [r.messages[2].content[0].content for r in results]

    assert asyncio.run(two_runs()) == ["11", "12"]


def test_streamable_http_with_headers(notes_http: HTTPServer) -> None:
    toolset = MCPToolset.http(notes_http.url, headers={"X-Team": "blue"})
    with toolset:
        assert toolset.name == "notes-http"
        model = ScriptedModel(
            [use_tools(("add", {"a": 1, "b": 2}), ("header", {"name": "X-Team"})), "ok"]
        )
        result = ReActLoop(model, [toolset]).run("Go.")
        assert [r.content for r in result.messages[2].content] == ["3", "blue"]
        assert asyncio.run(ToolRegistry([toolset]).acall("add", {"a": 5, "b": 5})).content == "10"
