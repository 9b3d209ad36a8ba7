"""The Plan-and-Execute plan schema the planner fills (`Plan`, `PlanStep`, the replanner's
`PlanRevision`), and the checks a plan passes (`plan_problems`).

A public module: pickled and stored plans name it. Rule: the schema and its checks only.
"""

from collections import Counter

import pydantic

from agentloops._problems import Problems


class PlanStep(pydantic.BaseModel):
    """One step of a plan, as the planner writes it."""

    model_config = pydantic.ConfigDict(defer_build=True)  # built on first use: fast import

    step_number: int = pydantic.Field(description="1, 2, 3, ... in the order to run")
    description: str = pydantic.Field(description="what this step must find out or do")
    tool_hint: str | None = pydantic.Field(
        default=None, description="the tool this step most likely needs, or null"
    )


class Plan(pydantic.BaseModel):
    """The planner's answer: the steps to run, in order."""

    model_config = pydantic.ConfigDict(defer_build=True)

    steps: list[PlanStep]


class PlanRevision(pydantic.BaseModel):
    """The replanner's answer: keep the remaining steps, or replace them."""

    model_config = pydantic.ConfigDict(defer_build=True)

    revise: bool = pydantic.Field(description="true to replace the remaining steps")
    steps: list[PlanStep] = pydantic.Field(
        default_factory=list, description="the new remaining steps (empty: nothing left to do)"
    )
    reason: str = pydantic.Field(default="", description="why, in one sentence")


def plan_problems(plan: Plan, *, max_steps: int) -> list[str]:
    """Every reason `plan` must not run: empty, too long, duplicate numbers, blank steps
    (the first `MAX_PROBLEMS` of them, then how many more; linear in the plan's size)."""
    problems = Problems()
    if not plan.steps:
        problems.add("the plan has no steps")
    if len(plan.steps) > max_steps:
        problems.add(f"the plan has {len(plan.steps)} steps; max_plan_steps={max_steps}")
    uses = Counter(s.step_number for s in plan.steps)
    for n in sorted(n for n, count in uses.items() if count > 1):
        problems.add(f"step number {n} is used {uses[n]} times")
    for s in plan.steps:
        if not s.description.strip():
            problems.add(f"step {s.step_number}: the description is blank")
    return problems.listed()
