"""Plan-and-Execute prompts: what each role is told, and the plan schema the planner fills.

Each system prompt starts with a stable first line naming its role, so logs, caches and
offline demo models can tell the calls apart. Override them on `PlanAndExecute`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pydantic

from agentloops._problems import Problems
from agentloops.tools import ToolRegistry

if TYPE_CHECKING:
    from agentloops._plan_state import RunState

PLANNER_SYSTEM = """You are the planner of a Plan-and-Execute agent.
Break the user's task into a short ordered list of steps. Each step is one piece of \
work that an executor with tools can finish on its own, described so that it can be done \
without seeing the other steps. Number the steps from 1. In tool_hint name the tool a \
step most likely needs, or leave it null. Use as few steps as the task needs."""

EXECUTOR_SYSTEM = """You are the executor of a Plan-and-Execute agent.
You get the overall task, one step of its plan, and the findings of earlier steps. Do \
this step only, using the tools when they help. Then answer with this step's findings: \
the facts, figures and sources that later steps and the final report need, concisely. \
If you cannot finish the step, say what is missing."""

REPORTER_SYSTEM = """You are the reporter of a Plan-and-Execute agent.
Write the final answer to the user's task from the results of the executed steps. Use \
only what the step results support. Where a step is marked incomplete, say what is \
missing instead of guessing."""

REPLANNER_SYSTEM = """You are the replanner of a Plan-and-Execute agent.
Given the task, the plan and the findings so far, decide whether the remaining steps \
still make sense. Answer revise=false to keep them. Answer revise=true with the new \
remaining steps to replace them (an empty list when the findings already answer the \
task). Never repeat a finished step."""


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


def planning_prompt(
    task: str,
    tools: ToolRegistry,
    max_steps: int,
    rejected: tuple[Plan, list[str]] | None = None,
) -> str:
    """The planner's user message: the task, the tools, the limit, and any rejected plan."""
    listed = "\n".join(f"- {t.name}: {t.description.splitlines()[0]}" for t in tools)
    parts = [
        f"Task: {task}",
        f"Tools the executor can use:\n{listed or '(none)'}",
        f"Plan at most {max_steps} steps.",
    ]
    if rejected is not None:
        plan, problems = rejected
        listed_problems = "\n".join(f"- {p}" for p in problems)
        parts.append(
            f"Your previous plan was rejected:\n{plan.model_dump_json()}\n"
            f"Problems:\n{listed_problems}\nWrite a new plan without these problems."
        )
    return "\n\n".join(parts)


def digest(state: RunState, upto: int, max_chars: int) -> str:
    """The findings of steps before `upto`, each cut to `max_chars` (never transcripts)."""
    lines = []
    for step, record in zip(state.plan.steps[:upto], state.steps[:upto], strict=True):
        text = record.result
        if len(text) > max_chars:
            text = text[:max_chars] + f" [... {len(text) - max_chars} characters cut]"
        lines.append(f"Step {step.step_number} ({step.description}): {text}")
    return "\n".join(lines) or "(none yet: this is the first step)"


def step_prompt(state: RunState, i: int, max_chars: int) -> str:
    """The first user message of step `i`'s ReAct loop."""
    step = state.plan.steps[i]
    hint = f"\nSuggested tool: {step.tool_hint}" if step.tool_hint else ""
    return (
        f"Task: {state.task}\n\n"
        f"Your step ({i + 1} of {len(state.plan.steps)}): {step.description}{hint}\n\n"
        f"Findings of earlier steps:\n{digest(state, i, max_chars)}"
    )


def replanning_prompt(state: RunState, i: int, max_chars: int) -> str:
    """The replanner's user message: task, findings so far, and the steps still to run."""
    remaining = (
        "\n".join(f"{s.step_number}. {s.description}" for s in state.plan.steps[i:]) or "(none)"
    )
    return (
        f"Task: {state.task}\n\n"
        f"Findings so far:\n{digest(state, i, max_chars)}\n\n"
        f"Remaining steps:\n{remaining}"
    )


def report_prompt(state: RunState) -> str:
    """The reporter's user message: the task and every step's result with its status."""
    lines = []
    for step, record in zip(state.plan.steps, state.steps, strict=True):
        lines.append(f"Step {step.step_number} [{record.status}]: {step.description}")
        lines.append(record.result or "(no result)")
        lines.append("")
    return f"Task: {state.task}\n\nStep results:\n" + "\n".join(lines).rstrip()
