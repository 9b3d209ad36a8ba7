"""Loops of each kind built to be each other's sub-agents, for the sub-agent tests.

Every model is a `FunctionModel` that answers from the request alone (so a run and its
resumption, in this process or another, see the same replies) and spends `USAGE` per call.
Each sub-loop adds 2 and 3 with its tool and answers "sum=5"; each parent loop calls the
sub-agent (tool "sub") next to a plain tool call ("add" of 1 and 1) and answers with what
both returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agentloops import (
    Message,
    ModelRequest,
    ModelResponse,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    Tool,
    ToolCall,
    Usage,
    tool,
)
from agentloops.testing import FunctionModel, respond, respond_structured

USAGE = Usage(input_tokens=10, output_tokens=5)
KINDS = ("react", "rewoo", "pe")
OWN_CALLS = {"react": 2, "rewoo": 2, "pe": 4}
"""Model calls a loop of each kind makes here on its own (planner, steps, reporter...)."""


def results_of(messages: list[Message]) -> list[str]:
    return [r.content for m in messages for r in m.tool_results]


def calls(*called: ToolCall) -> ModelResponse:
    return ModelResponse(Message("assistant", called), "tool_use", USAGE, "scripted")


def counted(
    fn: Callable[[ModelRequest], ModelResponse], log: list[str] | None, role: str
) -> FunctionModel:
    def answer(request: ModelRequest) -> ModelResponse:
        if log is not None:
            log.append(role)
        return fn(request)

    return FunctionModel(answer)


def add_tool(log: list[str] | None = None, name: str = "add", **options: Any) -> Tool:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        if log is not None:
            log.append(f"{name}({a},{b})")
        return a + b

    return tool(add, name=name, **options)


# -- the sub-loops: add 2 and 3 --------------------------------------------------------------


def react_sub_reply(request: ModelRequest) -> ModelResponse:
    seen = results_of(request.messages)
    if not seen:
        return calls(ToolCall("inner_1", "add", {"a": 2, "b": 3}))
    return respond(f"sum={seen[-1]}", usage=USAGE)


SUB_PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "add", "tool_name": "add", "tool_args": {"a": 2, "b": 3}}
    ]
}


def rewoo_sub_reply(request: ModelRequest) -> ModelResponse:
    if request.output is not None:
        return respond_structured(SUB_PLAN, usage=USAGE)
    found = re.search(r"output:\n(\d+)", request.messages[-1].text)
    return respond(f"sum={found.group(1) if found else '?'}", usage=USAGE)


def pe_planner_reply(steps: list[str]) -> Callable[[ModelRequest], ModelResponse]:
    def reply(request: ModelRequest) -> ModelResponse:
        if request.output is not None:
            plan = [{"step_number": i, "description": d} for i, d in enumerate(steps, 1)]
            return respond_structured({"steps": plan}, usage=USAGE)
        found = re.findall(r"sum=\d+|parent: [^\n]*", request.messages[-1].text)
        return respond(found[-1] if found else "no findings", usage=USAGE)

    return reply


def sub_loop(
    kind: str, log: list[str] | None = None, tools: list[Any] | None = None, **options: Any
) -> Any:
    """A loop of `kind` that adds 2 and 3 with its tool `add` and answers "sum=5"."""
    tools = tools if tools is not None else [add_tool(log)]
    if kind == "react":
        return ReActLoop(counted(react_sub_reply, log, "sub-react"), tools, **options)
    if kind == "rewoo":
        return ReWOOPipeline(counted(rewoo_sub_reply, log, "sub-rewoo"), tools, **options)
    return PlanAndExecute(
        counted(pe_planner_reply(["add 2 and 3"]), log, "sub-pe"),
        tools,
        executor=counted(react_sub_reply, log, "sub-pe-step"),
        **options,
    )


# -- the parents: the sub-agent next to a plain call ------------------------------------------

TASK = "Add 2 and 3."


def react_parent_reply(request: ModelRequest) -> ModelResponse:
    seen = results_of(request.messages)
    if not seen:
        return calls(
            ToolCall("outer_1", "sub", {"task": TASK}), ToolCall("outer_2", "add", {"a": 1, "b": 1})
        )
    return respond(f"parent: {' / '.join(seen)}", usage=USAGE)


PARENT_PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "ask", "tool_name": "sub", "tool_args": {"task": TASK}},
        {"step_id": "#E2", "description": "add", "tool_name": "add", "tool_args": {"a": 1, "b": 1}},
    ]
}


def rewoo_parent_reply(request: ModelRequest) -> ModelResponse:
    if request.output is not None:
        return respond_structured(PARENT_PLAN, usage=USAGE)
    found = re.findall(r"sum=\d+", request.messages[-1].text)
    return respond("parent: " + " / ".join(found), usage=USAGE)


def parent_loop(kind: str, sub: Tool, log: list[str] | None = None, **options: Any) -> Any:
    """A loop of `kind` that calls `sub` (the agent tool "sub") and adds 1 and 1."""
    tools = [sub, add_tool(log)]
    if kind == "react":
        return ReActLoop(counted(react_parent_reply, log, "parent-react"), tools, **options)
    if kind == "rewoo":
        return ReWOOPipeline(counted(rewoo_parent_reply, log, "parent-rewoo"), tools, **options)
    return PlanAndExecute(
        counted(pe_planner_reply(["ask the sub-agent"]), log, "parent-pe"),
        tools,
        executor=counted(react_parent_reply, log, "parent-pe-step"),
        **options,
    )
