"""Router: structured route choice, and the fallback that always answers."""

from __future__ import annotations

from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    ModelCallFinished,
    ModelError,
    RouteDecision,
    Usage,
)
from agentloops.router import ROUTER_SYSTEM
from agentloops.testing import ScriptedModel, respond, respond_structured

ROUTES = {
    "react": "questions that need tools step by step",
    "rewoo": "tasks whose tool calls are known up front",
    "chat": "small talk; no tools",
}


def choice(route: str, reasoning: str = "because") -> Any:
    return respond_structured({"route": route, "reasoning": reasoning}, usage=Usage(5, 1))


def test_the_model_picks_a_route(Router) -> None:
    events: list[Any] = []
    model = ScriptedModel([choice("rewoo", "three known lookups")])
    decision = Router(model, ROUTES, default="chat", on_event=events.append).route("Compare A, B")
    assert decision == RouteDecision(
        "rewoo", "three known lookups", usage=Usage(5, 1), model_calls=1
    )
    assert not decision.fallback
    [request] = model.requests
    assert request.system == ROUTER_SYSTEM
    assert ROUTER_SYSTEM.startswith("You are the router of an agent system.")
    assert request.output is not None
    assert set(request.output.schema["properties"]) == {"route", "reasoning"}
    prompt = request.messages[0].text
    assert "Compare A, B" in prompt
    assert all(f"- {name}: {text}" in prompt for name, text in ROUTES.items())
    assert [e.loop for e in events if isinstance(e, ModelCallFinished)] == ["router"]


def test_a_route_name_in_another_case_still_matches(Router) -> None:
    decision = Router(ScriptedModel([choice(" ReAct ")]), ROUTES, default="chat").route("t")
    assert (decision.route, decision.fallback) == ("react", False)


def test_an_unknown_route_falls_back_to_the_default_and_says_so(Router) -> None:
    model = ScriptedModel([choice("langgraph")])
    decision = Router(model, ROUTES, default="chat").route("t")
    assert decision.route == "chat"
    assert decision.fallback
    assert "unknown route 'langgraph'" in decision.detail
    assert "fell back to the default route 'chat'" in decision.reasoning
    assert decision.model_calls == 1
    assert decision.usage == Usage(5, 1)


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_garbage_falls_back_after_the_retries(retries: int, Router) -> None:
    model = ScriptedModel([respond("I think react?", usage=Usage(3, 1))] * (retries + 1))
    decision = Router(model, ROUTES, default="chat", max_retries=retries).route("t")
    assert (decision.route, decision.fallback) == ("chat", True)
    assert "unusable output" in decision.detail
    assert decision.model_calls == retries + 1
    assert decision.usage == Usage(3 * (retries + 1), retries + 1)
    model.assert_complete()


def test_garbage_then_a_valid_answer_is_not_a_fallback(Router) -> None:
    model = ScriptedModel([respond_structured({"reasoning": "no route"}), choice("react")])
    decision = Router(model, ROUTES, default="chat").route("t")
    assert (decision.route, decision.fallback, decision.model_calls) == ("react", False, 2)


def test_a_provider_failure_is_not_hidden(Router) -> None:
    with pytest.raises(ModelError):
        Router(ScriptedModel([ModelError("down")]), ROUTES, default="chat").route("t")


@pytest.mark.parametrize(
    ("routes", "default", "message"),
    [({}, "chat", "at least one route"), (ROUTES, "other", "default 'other' is not a route")],
)
def test_bad_configuration(routes: dict[str, str], default: str, message: str, Router) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Router(ScriptedModel([]), routes, default=default)


def test_negative_retries_are_refused_at_construction(Router) -> None:
    with pytest.raises(ConfigurationError, match="max_retries must be >= 0, got -1"):
        Router(ScriptedModel([]), ROUTES, default="chat", max_retries=-1)
