"""Which part of the system sent a model request, read from the request itself, and
the one name each role goes by on screen.

The usage meter counts calls per role with it, the live views name each model call with
it, and the offline stand-in model decides what to answer with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentloops import ModelRequest

_ROLE_LINE = re.compile(r"you are the (\w+) of (?:an? )?([\w-]+)", re.I)
_ROLES = {
    "router",
    "planner",
    "solver",
    "executor",
    "reporter",
    "replanner",
    "evaluator",
    "trader",
}
_SCHEMAS = {
    "RouteChoice": "router",
    "ReWOOPlan": "rewoo_planner",
    "Plan": "planner",
    "PlanRevision": "replanner",
}


def role_of(request: ModelRequest) -> str:
    """Which part of the system sent this request.

    Every agentloops component starts its system prompt with a stable first line
    ("You are the planner of a ReWOO agent."); structured requests also carry their
    schema's name. Anything else with tools is treated as a ReAct agent.
    """
    if request.role == "compactor":  # Compaction's summary of older turns (--context-window)
        return "compactor"
    first = request.system.strip().splitlines()[0] if request.system.strip() else ""
    match = _ROLE_LINE.search(first)
    if match:
        role, system = match.group(1).lower(), match.group(2).lower()
        if (role, system) == ("planner", "rewoo"):
            return "rewoo_planner"
        if role in _ROLES:
            return role
    if request.output is not None:
        return _SCHEMAS.get(request.output.name, "structured:" + request.output.name)
    return "agent" if request.tools else "text"


_LABELS = {"rewoo_planner": "ReWOO planner", "solver": "ReWOO solver"}
_ORDER = ["router", "rewoo_planner", "solver", "planner", "executor", "replanner", "reporter"]
_ORDER += ["evaluator", "trader"]


def label(role: str) -> str:
    """A role as the command line and the page name it, in the live lines and the usage
    table alike ("rewoo_planner" -> "ReWOO planner"); records keep the role itself."""
    return _LABELS.get(role, role)


def in_order(roles: Iterable[str]) -> list[str]:
    """`roles` in the order the graph calls them (unknown ones last, alphabetically)."""
    return sorted(roles, key=lambda r: (_ORDER.index(r) if r in _ORDER else len(_ORDER), r))
