"""`tools/list_changed`: a server that changes its tools mid-run is listed again before the
next model call; a tool that vanished is an error result, not a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_helpers import notes_toolset

from agentloops import ReActLoop
from agentloops.mcp import MCPToolset
from agentloops.testing import ScriptedModel, use_tools


@pytest.fixture(scope="module")
def changing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MCPToolset]:
    with notes_toolset(tmp_path_factory.mktemp("changing") / "ledger.jsonl") as toolset:
        yield toolset


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_tools_added_and_removed_mid_run_reach_the_next_model_call(
    changing: MCPToolset, driver: str
) -> None:
    name = f"fresh_{driver}"
    model = ScriptedModel(
        [
            use_tools(("grow", {"tool_name": name})),
            use_tools((name, {})),
            use_tools(("shrink", {"tool_name": name})),
            use_tools((name, {})),
            "done",
        ]
    )
    loop = ReActLoop(model, [changing])
    result = loop.run("Change.") if driver == "run" else asyncio.run(loop.arun("Change."))
    offered = [{t.name for t in request.tools} for request in model.requests]
    assert name not in offered[0]
    assert name in offered[1] and name in offered[2]
    assert name not in offered[3] and name not in offered[4]
    results = [m.content[0] for m in result.messages[2::2]]
    assert [r.content for r in results[:3]] == [f"added {name}", f"I am {name}", f"removed {name}"]
    vanished = results[3]
    assert vanished.is_error
    assert vanished.content.startswith(f"unknown tool {name!r}; available tools: add, ")
    assert result.answer == "done"


def test_a_revision_counts_listings_and_closing(tmp_path: Path) -> None:
    toolset = notes_toolset(tmp_path / "l.jsonl")
    assert (toolset.revision, toolset.tools()) == (0, ())
    with toolset:
        opened = toolset.revision
        assert opened > 0 and len(toolset.tools()) > 10
    assert toolset.revision > opened and toolset.tools() == ()
