"""A run's header keeps the fingerprint of the loop that started it (system prompts, tool
names and schemas, limits); resuming it with a loop built otherwise is a `CheckpointError`
naming what changed, unless `allow_changes=` names it (a deliberate upgrade), for the three
loops and for `status` (issue 19: a resume with a changed system prompt replayed silently).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloops import (
    CheckpointError,
    ConfigurationError,
    MemoryStore,
    ModelError,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    ToolCall,
    tool,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools


@tool
def look(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool(name="look")
def look_by_id(key: str, version: int = 1) -> str:
    """Look a key up, in a given version."""
    return key.upper()


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


def failed_run(store: Any, **settings: Any) -> None:
    """A ReAct run that called `look`, then failed asking for its answer."""
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), ModelError("down")])
    with pytest.raises(ModelError):
        ReActLoop(model, [look], store=store, **settings).run("q", run_id="r1")


@pytest.mark.parametrize(
    ("changed", "says"),
    [
        ({"system": "Be terse."}, "system changed"),
        ({"max_steps": 5}, "max_steps 20 -> 5"),
        ({"max_tool_calls": 3}, "max_tool_calls None -> 3"),
        ({"tools": [look_by_id]}, "tools: 'look' changed"),
        ({"tools": [look, note]}, "tools: 'note' added"),
        ({"tools": []}, "tools: 'look' removed"),
    ],
)
def test_resuming_with_other_settings_is_refused_naming_what_changed(
    changed: dict[str, Any], says: str
) -> None:
    store = MemoryStore()
    failed_run(store, system="Be thorough, and explain every step.")
    settings = {"system": "Be thorough, and explain every step.", "tools": [look]} | changed
    loop = ReActLoop(ScriptedModel(["A."]), settings.pop("tools"), store=store, **settings)
    before = store.read("r1")
    for read in (loop.resume, loop.status):
        with pytest.raises(CheckpointError, match="does not match this loop") as caught:
            read("r1")
        assert says in str(caught.value) and caught.value.field == "fingerprint"
    assert store.read("r1") == before and not store.run_info("r1").leased
    assert loop.model.calls == 0  # type: ignore[attr-defined]


def test_allow_changes_resumes_under_the_new_settings_and_the_header_keeps_them() -> None:
    store = MemoryStore()
    failed_run(store, system="Be thorough.")
    kept = store.run_info("r1").meta["fingerprint"]
    model = ScriptedModel(["A."])
    upgraded = ReActLoop(model, [look], store=store, system="Be terse.", max_steps=30)
    with pytest.raises(CheckpointError, match=r"allow_changes=\['max_steps', 'system'\]"):
        upgraded.resume("r1", allow_changes={"system"})  # both changed: both must be named
    result = upgraded.resume("r1", allow_changes={"system", "max_steps"})
    assert result.answer == "A." and model.requests[0].system == "Be terse."
    changed = [r for r in store.read("r1") if r.kind == "settings_changed"]
    assert [c.data["changed"] for c in changed] == [["max_steps", "system"]]
    now = store.run_info("r1").meta["fingerprint"]
    assert now["max_steps"] == 30 and now["system"] != kept["system"]
    again = ReActLoop(ScriptedModel([]), [look], store=store, system="Be terse.", max_steps=30)
    assert again.resume("r1").answer == "A."  # the new settings are the run's now
    with pytest.raises(CheckpointError, match=r"system 'Be terse\.' -> 'Be thorough\.'"):
        ReActLoop(ScriptedModel([]), [look], store=store, system="Be thorough.").status("r1")


def test_allow_changes_must_name_parts_of_the_fingerprint() -> None:
    store = MemoryStore()
    failed_run(store)
    loop = ReActLoop(ScriptedModel(["A."]), [look], store=store)
    with pytest.raises(ConfigurationError, match=r"allow_changes names \['prompt'\]"):
        loop.resume("r1", allow_changes=["prompt"])
    with pytest.raises(ConfigurationError, match="collection of part names"):
        loop.resume("r1", allow_changes="system")
    assert not store.run_info("r1").leased


def test_allow_changes_on_a_paused_result_is_a_mistake() -> None:
    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send."""
        return "sent"

    paused = ReActLoop(ScriptedModel([use_tools(("send", {"to": "a"}))]), [send]).run("q")
    loop = ReActLoop(ScriptedModel(["Sent."]), [send])
    with pytest.raises(ConfigurationError, match="resumed by its id"):
        loop.resume(paused, {paused.pending_approvals[0].id: True}, allow_changes=["system"])


def test_an_unchanged_loop_resumes_as_before() -> None:
    store = MemoryStore()
    failed_run(store, system="Be terse.")
    result = ReActLoop(ScriptedModel(["A."]), [look], store=store, system="Be terse.").resume("r1")
    assert result.answer == "A."
    assert not [r for r in store.read("r1") if r.kind == "settings_changed"]


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "look", "tool_args": {"key": "a"}}
    ]
}


def test_a_rewoo_run_resumed_with_another_planner_prompt_is_refused() -> None:
    store = MemoryStore()
    first = ScriptedModel([respond_structured(PLAN), ModelError("solver down")])
    with pytest.raises(ModelError):
        ReWOOPipeline(first, [look], store=store).run("q", run_id="w1")
    changed = ReWOOPipeline(
        ScriptedModel(["A"]), [look], store=store, planner_system="Plan in one step."
    )
    with pytest.raises(CheckpointError, match="planner_system changed"):
        changed.resume("w1")
    assert changed.resume("w1", allow_changes=["planner_system"]).answer == "A"


def test_a_plan_and_execute_run_resumed_with_another_step_prompt_is_refused() -> None:
    store = MemoryStore()
    plan = {"steps": [{"step_number": 1, "description": "look"}]}
    first = ScriptedModel([respond_structured(plan), "found", ModelError("reporter down")])
    with pytest.raises(ModelError):
        PlanAndExecute(first, [look], store=store).run("t", run_id="p1")
    changed = PlanAndExecute(ScriptedModel([]), [look], store=store, executor_system="Hurry.")
    with pytest.raises(CheckpointError, match="executor_system changed"):
        changed.resume("p1")
    stricter = PlanAndExecute(ScriptedModel([]), [look], store=store, max_step_iterations=2)
    with pytest.raises(CheckpointError, match="max_step_iterations 10 -> 2"):
        stricter.status("p1")


def test_a_format_1_run_gets_its_fingerprint_at_its_first_resume() -> None:
    """A run journaled before fingerprints has none to compare: the first resume keeps
    the resuming loop's, and later resumes are checked against it."""
    store = MemoryStore()
    store.release(store.start("r1", kind="react", ttl=30, meta={"format": 1, "task": "q"}))
    ReActLoop(ScriptedModel(["Hi."]), [look], store=store, system="Be terse.").resume("r1")
    assert "fingerprint" in store.run_info("r1").meta
    with pytest.raises(CheckpointError, match=r"system 'Be terse\.' -> 'Be long\.'"):
        ReActLoop(ScriptedModel([]), [look], store=store, system="Be long.").resume("r1")


class Listing:
    """A toolset (`agentloops.tools.Toolset`) whose tools its server may re-list."""

    source = "MCP server 'notes'"

    def __init__(self, *tools: Any):
        self.listed = list(tools)
        self.revision = 0

    def tools(self) -> list[Any]:
        return self.listed


def test_a_toolsets_tools_are_the_servers_to_change_but_the_toolset_is_the_runs() -> None:
    """An MCP server may re-list its tools while a run goes on: they are not compared on
    resume; adding or removing the toolset itself is."""
    store = MemoryStore()
    listing = Listing(note)
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), ModelError("down")])
    with pytest.raises(ModelError):
        ReActLoop(model, [look, listing], store=store).run("q", run_id="r1")
    relisted = Listing()  # the same server, which now lists nothing
    status = ReActLoop(ScriptedModel([]), [look, relisted], store=store).status("r1")
    assert status.stop_reason == "running" and status.tool_calls == 1
    with pytest.raises(CheckpointError, match="tools: \"MCP server 'notes'\" removed"):
        ReActLoop(ScriptedModel([]), [look], store=store).resume("r1")
    result = ReActLoop(ScriptedModel(["A."]), [look, relisted], store=store).resume("r1")
    assert result.answer == "A."


def test_a_changed_cost_cap_is_refused() -> None:
    from agentloops import Price

    store = MemoryStore()
    price = Price(input=1, output=1)
    failed_run(store, max_cost="0.50", price=price)
    loop = ReActLoop(ScriptedModel(["A."]), [look], store=store, max_cost="0.10", price=price)
    with pytest.raises(CheckpointError, match=r"max_cost '0\.50' -> '0\.10'"):
        loop.resume("r1")
