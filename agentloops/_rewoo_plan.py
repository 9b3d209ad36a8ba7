"""The ReWOO plan schema the planner fills, and the checks a plan passes before it runs.

Validation reports every problem at once, so one re-plan can fix them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pydantic

from agentloops._placeholders import STEP_ID, masked_errors, references
from agentloops._scheduler import cycles
from agentloops.errors import PlanValidationError
from agentloops.tools import Tool, ToolRegistry, field_errors


class ReWOOPlanStep(pydantic.BaseModel):
    """One tool call of a ReWOO plan."""

    model_config = pydantic.ConfigDict(defer_build=True)  # built on first use: fast import

    step_id: str = pydantic.Field(description='"#E1", "#E2", ... in plan order')
    description: str = pydantic.Field(description="what this step finds out, and why")
    tool_name: str = pydantic.Field(description="one of the listed tools")
    tool_args: dict[str, Any] = pydantic.Field(
        description="arguments matching the tool's schema; \"#E<n>\" stands for step n's output"
    )
    depends_on: list[str] = pydantic.Field(
        default_factory=list, description="the step ids whose outputs this step uses"
    )


class ReWOOPlan(pydantic.BaseModel):
    """Every tool call needed for the task, written before any of them runs."""

    model_config = pydantic.ConfigDict(defer_build=True)

    steps: list[ReWOOPlanStep]


def validate_plan(
    plan: ReWOOPlan | dict[str, Any],
    registry: ToolRegistry | Iterable[Tool | Callable[..., Any]],
    *,
    max_steps: int = 20,
) -> None:
    """Check a plan before anything runs; report every problem at once.

    `plan` may be a `ReWOOPlan` or its JSON-like dict; `registry` a `ToolRegistry` or
    the tools themselves.

    Raises:
        PlanValidationError: `.problems` lists each problem, naming the steps involved
            (a dict that does not even match the plan schema is one problem per field).
    """
    if not isinstance(plan, ReWOOPlan):
        try:
            plan = ReWOOPlan.model_validate(plan)
        except pydantic.ValidationError as exc:
            raise PlanValidationError(field_errors(exc, root="plan", width=None)) from exc
    if not isinstance(registry, ToolRegistry):
        registry = ToolRegistry(registry)
    problems = plan_problems(plan, registry, max_steps)
    if problems:
        raise PlanValidationError(problems, plan=plan)


def plan_problems(plan: ReWOOPlan, registry: ToolRegistry, max_steps: int) -> list[str]:
    steps = plan.steps
    if not steps:
        return ["the plan has no steps: plan at least one tool call"]
    problems = []
    if len(steps) > max_steps:
        problems.append(f"the plan has {len(steps)} steps; max_steps={max_steps}")
    known = {s.step_id for s in steps}
    for step_id, n in Counter(s.step_id for s in steps).items():
        if n > 1:
            at = ", ".join(str(i) for i, s in enumerate(steps, 1) if s.step_id == step_id)
            problems.append(f"step_id {step_id!r} is used by {n} steps (positions {at})")
    for position, step in enumerate(steps, 1):
        problems.extend(_step_problems(position, step, known, registry))
    graph: dict[str, list[str]] = {}
    for s in steps:  # self-dependencies and unknown ids are reported per step
        graph.setdefault(s.step_id, []).extend(
            d for d in s.depends_on if d != s.step_id and d in known
        )
    for path in cycles(graph):
        problems.append(f"dependency cycle {' -> '.join(path)}: none of these steps can start")
    return problems


def _step_problems(
    position: int, step: ReWOOPlanStep, known: set[str], registry: ToolRegistry
) -> list[str]:
    sid = step.step_id
    if STEP_ID.fullmatch(sid):
        label, problems = sid, []
    else:
        label = f"step {position} ({sid!r})"
        problems = [f"{label}: step_id must be #E and a positive number: #E1, #E2, ..."]
    tool = registry.get(step.tool_name)
    if tool is None:
        available = ", ".join(t.name for t in registry if not t.requires_approval) or "(none)"
        problems.append(f"{label}: unknown tool {step.tool_name!r}; available: {available}")
    elif tool.requires_approval:
        problems.append(
            f"{label}: tool {tool.name!r} requires human approval, which the ReWOO worker "
            "cannot ask for; run it with ReActLoop or PlanAndExecute instead"
        )
    else:
        try:
            tool.validate(step.tool_args)
        except pydantic.ValidationError as exc:
            errors = masked_errors(exc)
            if errors:
                problems.append(f"{label}: tool_args fail {tool.name!r}: {'; '.join(errors)}")
    for dep in dict.fromkeys(step.depends_on):
        if dep == sid:
            problems.append(f"{label}: depends on itself")
        elif dep not in known:
            problems.append(f"{label}: depends_on names {dep!r}, which is no step of the plan")
    for ref in references(step.tool_args):
        if ref == sid:
            if sid not in step.depends_on:
                problems.append(f"{label}: tool_args use its own output {ref}")
        elif ref not in known:
            problems.append(f"{label}: tool_args use {ref}, which is no step of the plan")
        elif ref not in step.depends_on:
            problems.append(f"{label}: tool_args use {ref}, but depends_on does not list it")
    return problems
