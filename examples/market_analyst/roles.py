"""Which part of the system sent a model request, read from the request itself.

The usage meter counts calls per role with it, and the offline stand-in model decides
what to answer with it.
"""

from __future__ import annotations

import re

from agentloops import ModelRequest

_ROLE_LINE = re.compile(r"you are the (\w+) of (?:an? )?([\w-]+)", re.I)
_ROLES = {
    "router",
    "planner",
    "solver",
    "executor",
    "reporter",
    "replanner",
    "writer",
    "evaluator",
    "trader",
}
_SCHEMAS = {
    "RouteChoice": "router",
    "ReWOOPlan": "rewoo_planner",
    "Plan": "planner",
    "PlanRevision": "replanner",
    "AnalystReport": "writer",
}


def role_of(request: ModelRequest) -> str:
    """Which part of the system sent this request.

    Every agentloops component starts its system prompt with a stable first line
    ("You are the planner of a ReWOO agent."); structured requests also carry their
    schema's name. Anything else with tools is treated as a ReAct agent.
    """
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
