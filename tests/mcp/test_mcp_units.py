"""The parts of agentloops.mcp that need no server: the approval and doubt rules an MCP tool
gets from its annotations and the toolset's settings, schema checks, result rendering."""

from __future__ import annotations

import base64
from typing import Any

import pydantic
import pytest
from mcp import types

from agentloops import ToolOutcome, ToolRegistry
from agentloops._validation import field_errors
from agentloops.mcp import MCPTool
from agentloops.mcp._results import rendered
from agentloops.mcp._schema import validator

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = types.ToolAnnotations(destructive_hint=True)
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Recorder:
    """Stands in for a toolset: records the calls, answers with their arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []

    def call(self, tool: MCPTool, arguments: dict[str, Any], key: str | None) -> ToolOutcome:
        self.calls.append((tool.server_name, arguments, key))
        return ToolOutcome(content=f"{tool.server_name}{arguments}")

    async def acall(self, tool: MCPTool, arguments: dict[str, Any], key: str | None) -> ToolOutcome:
        return self.call(tool, arguments, key)


def mcp_tool(
    name: str = "t",
    hints: types.ToolAnnotations | None = None,
    requires_approval: Any = None,
    on_doubt: Any = None,
    schema: dict[str, Any] = SCHEMA,
    caller: Any = None,
) -> MCPTool:
    listed = types.Tool(name=name, input_schema=schema, annotations=hints, description="d")
    return MCPTool(
        listed,
        name=name,
        caller=caller or Recorder(),
        requires_approval=requires_approval,
        timeout=5.0,
        on_doubt=on_doubt,
    )


@pytest.mark.parametrize(
    ("hints", "choice", "asks"),
    [
        (READ_ONLY, None, False),
        (None, None, True),  # MCP's defaults: not read-only, may destroy
        (DESTRUCTIVE, None, True),
        (DESTRUCTIVE, False, False),
        (READ_ONLY, True, True),
        (READ_ONLY, {"t", "u"}, True),
        (DESTRUCTIVE, {"u"}, False),
        (None, frozenset(), False),
    ],
)
def test_annotations_and_the_toolsets_choice_decide_approval(
    hints: types.ToolAnnotations | None, choice: Any, asks: bool
) -> None:
    assert mcp_tool(hints=hints, requires_approval=choice).needs_approval({"n": 1}) is asks


def test_a_predicate_decides_per_call_and_a_raising_one_asks() -> None:
    t = mcp_tool(requires_approval=lambda name, args: name == "t" and args["n"] > 10)
    assert (t.needs_approval({"n": 1}), t.needs_approval({"n": 11})) == (False, True)
    assert mcp_tool(requires_approval=lambda name, args: args["missing"]).needs_approval({"n": 1})


@pytest.mark.parametrize(
    ("hints", "on_doubt", "expected"),
    [
        (READ_ONLY, None, "rerun"),
        (types.ToolAnnotations(idempotent_hint=True), None, "rerun"),
        (None, None, "ask"),
        (READ_ONLY, "fail", "fail"),
        (None, "rerun", "rerun"),
    ],
)
def test_what_a_durable_run_does_with_a_call_in_doubt(
    hints: types.ToolAnnotations | None, on_doubt: Any, expected: str
) -> None:
    assert mcp_tool(hints=hints, on_doubt=on_doubt).on_doubt == expected


def test_the_tool_calls_its_toolset_with_the_arguments_and_the_key() -> None:
    recorder = Recorder()
    registry = ToolRegistry([mcp_tool(hints=READ_ONLY, caller=recorder)])
    assert registry.call("t", {"n": 3}).content == "t{'n': 3}"
    assert registry.call("t", {"n": "3"}).content == (
        "invalid arguments for 't': n: should be of type 'integer' (got '3')"
    )
    assert recorder.calls == [("t", {"n": 3}, None)]


def test_an_mcp_tool_cannot_travel_to_another_process() -> None:
    import pickle

    with pytest.raises(TypeError, match="holds a live connection"):
        pickle.dumps(mcp_tool())


def test_an_invalid_schema_is_shown_as_is_and_not_checked_here() -> None:
    broken = {"type": "object", "properties": {"n": {"type": "nonsense"}}}
    assert validator(broken) is None
    t = mcp_tool(schema=broken)
    assert t.validate({"n": object}) == {"n": object}
    assert t.spec().input_schema == broken


@pytest.mark.parametrize(
    ("schema", "args", "lines"),
    [
        (SCHEMA, {}, ["n: Field required"]),
        (
            {"type": "object", "properties": {"a": {"const": 1}}, "additionalProperties": False},
            {"a": 2, "b": 3},
            ["b: Extra inputs are not permitted (got 3)", "a: should be 1 (got 2)"],
        ),
        (
            {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
            {"a": 1},
            ["a: should be of type 'string' or 'null' (got 1)"],
        ),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5}}},
            {"a": 1},
            ["a: 1 is less than the minimum of 5 (got 1)"],
        ),
        (
            {
                "type": "object",
                "properties": {"xs": {"type": "array", "items": {"type": "string"}}},
            },
            {"xs": ["a", 2]},
            ["xs.1: should be of type 'string' (got 2)"],
        ),
    ],
)
def test_schema_problems_come_out_field_by_field(
    schema: dict[str, Any], args: dict[str, Any], lines: list[str]
) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        mcp_tool(schema=schema).validate(args)
    got = field_errors(caught.value)
    assert got == lines


def test_results_render_every_kind_of_block() -> None:
    png = base64.b64encode(b"x" * 10).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(text="one"),
            types.AudioContent(data=png, mime_type="audio/wav"),
            types.ImageContent(data="not base64!", mime_type="image/png"),
            types.ResourceLink(name="r", uri="file:///r.txt", mime_type="text/plain"),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///b", blob=png, mime_type="x/y")
            ),
        ],
        is_error=True,
    )
    text, is_error = rendered(result)
    assert is_error
    assert text.splitlines() == [
        "one",
        "[audio: audio/wav, 10 bytes; not shown]",
        "[image: image/png, 11 characters of data that is not valid base64; not shown]",
        "[resource link: r <file:///r.txt> (text/plain)]",
        "[resource <file:///b>, x/y, 10 bytes; not shown]",
    ]
    assert rendered(types.CallToolResult(content=[])) == ("(no output)", False)
    structured = types.CallToolResult(content=[], structured_content={"a": [1, "é"]})
    assert rendered(structured) == ('{"a": [1, "é"]}', False)


def run_python(code: str) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return out.stdout.strip() + out.stderr.strip()


def test_import_agentloops_does_not_import_the_mcp_sdk() -> None:
    code = "import sys, agentloops; from agentloops import ReActLoop; print('mcp' in sys.modules)"
    assert run_python(code) == "False"


def test_without_the_extra_agentloops_mcp_says_which_to_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "try:\n    import agentloops.mcp\nexcept ModuleNotFoundError as exc:\n    print(exc)"
    )
    assert run_python(code) == (
        "agentloops.mcp needs the MCP SDK (mcp is not installed): pip install 'agentloops-kit[mcp]'"
    )
