"""`ModelRequest.role`: every loop's requests say what they were made for, a structured
call's retries keep it, the events and the cost per role read it, and no provider sends it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import respx

from agentloops import (
    Evaluator,
    Message,
    ModelCallFinished,
    ModelRequest,
    OpenAICompatModel,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    Router,
    tool,
)
from agentloops.testing import FunctionModel, respond, respond_structured, use_tools


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_plan_and_execute_asks_its_planner_executor_replanner_and_reporter() -> None:
    roles: list[str] = []
    events: list[Any] = []

    def brain(request: ModelRequest) -> Any:
        roles.append(request.role)
        if request.role == "planner":
            steps = [{"step_number": n, "description": f"look {n}"} for n in (1, 2)]
            return respond_structured({"steps": steps})
        if request.role == "replanner":
            if roles.count("replanner") == 1:
                return respond("not a revision")  # a structured retry: the same role
            return respond_structured({"revise": False})
        if request.role == "executor" and not request.messages[-1].tool_results:
            return use_tools(("lookup", {"city": "Oslo"}))
        return respond("report" if request.role == "reporter" else "sunny")

    loop = PlanAndExecute(FunctionModel(brain), [lookup], replan=True, on_event=events.append)
    result = loop.run("Weather?")
    assert result.answer == "report"
    step = ["executor", "executor"]  # a tool call, then the step's answer
    assert roles == ["planner", *step, "replanner", "replanner", *step, "reporter"]
    assert [e.role for e in events if isinstance(e, ModelCallFinished)] == roles


def test_rewoo_react_router_and_evaluator_name_their_calls() -> None:
    roles: list[str] = []
    plan = {
        "steps": [
            {
                "step_id": "#E1",
                "description": "x",
                "tool_name": "lookup",
                "tool_args": {"city": "A"},
            }
        ]
    }

    def brain(request: ModelRequest) -> Any:
        roles.append(request.role)
        answers = {
            "planner": respond_structured(plan),
            "router": respond_structured({"route": "a"}),
            "evaluator": respond_structured({"verdict": "pass", "reasons": ["fine"]}),
        }
        return answers.get(request.role, respond("done"))

    model = FunctionModel(brain)
    ReWOOPipeline(model, [lookup]).run("q")
    ReActLoop(model, []).run("q")
    Router(model, {"a": "the first"}, default="a").route("q")
    Evaluator(model).evaluate("q", "draft")
    assert roles == ["planner", "solver", "react", "router", "evaluator"]


def test_react_at_its_step_limit_keeps_its_role() -> None:
    roles: list[str] = []

    def brain(request: ModelRequest) -> Any:
        roles.append(request.role)
        if request.tool_choice == "none":
            return respond("final")
        return use_tools(("lookup", {"city": "A"}))

    ReActLoop(FunctionModel(brain), [lookup], max_steps=1, answer_at_limit=True).run("q")
    assert roles == ["react", "react"]


def test_providers_never_send_the_role() -> None:
    model = OpenAICompatModel("http://llm.test/v1", "m")
    reply = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
    with respx.mock() as mock:
        route = mock.post("http://llm.test/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=reply)
        )
        model.complete(ModelRequest("", [Message.user("q")], role="planner"))
    assert "planner" not in json.dumps(json.loads(route.calls[0].request.content))
