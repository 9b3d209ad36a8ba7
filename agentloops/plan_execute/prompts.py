"""Plan-and-Execute prompts: what each role is told, and how a run is written into them.

Each system prompt starts with a stable first line naming its role, so logs, caches and
offline demo models can tell the calls apart. Override them on `PlanAndExecute`.

Rule: text and how a run is written into it; no model call, no machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloops._text import cut
from agentloops.tools import ToolRegistry

if TYPE_CHECKING:
    from agentloops.plan_execute.result import RunState
    from agentloops.plan_execute.schema import Plan

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

MAX_REJECTED_PLAN = 8000
"""A re-plan prompt quotes at most this much of the rejected plan (head and tail)."""

REPLANNER_SYSTEM = """You are the replanner of a Plan-and-Execute agent.
Given the task, the plan and the findings so far, decide whether the remaining steps \
still make sense. Answer revise=false to keep them. Answer revise=true with the new \
remaining steps to replace them (an empty list when the findings already answer the \
task). Never repeat a finished step."""


def planning_prompt(
    task: str,
    tools: ToolRegistry,
    max_steps: int,
    rejected: tuple[Plan, list[str]] | None = None,
) -> str:
    """The planner's user message: the task, the tools, the limit, and any rejected plan."""
    listed = "\n".join(f"- {t.name}: {t.description.partition(chr(10))[0]}" for t in tools)
    parts = [
        f"Task: {task}",
        f"Tools the executor can use:\n{listed or '(none)'}",
        f"Plan at most {max_steps} steps.",
    ]
    if rejected is not None:
        plan, problems = rejected
        listed_problems = "\n".join(f"- {p}" for p in problems)
        shown = cut(
            plan.model_dump_json(),
            MAX_REJECTED_PLAN,
            "[... {cut} of {total} characters of the plan cut ...]",
        )
        parts.append(
            f"Your previous plan was rejected:\n{shown}\n"
            f"Problems:\n{listed_problems}\nWrite a new plan without these problems."
        )
    return "\n\n".join(parts)


def digest(state: RunState, upto: int, max_chars: int) -> str:
    """The findings of steps before `upto`, each cut to `max_chars` (never transcripts)."""
    lines = []
    for step, record in zip(state.plan.steps[:upto], state.steps[:upto], strict=True):
        text = cut(record.result, max_chars, "[... {cut} characters cut]", tail=False)
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
