"""The checks a ReWOO plan passes before it runs (the schema is in `rewoo.schema`; the
public `validate_plan` in `agentloops.rewoo` raises what these find).

Validation reports every problem at once (up to a bound), so one re-plan can fix them
all, and takes time linear in the plan's size.

Rule: checks only: no model call, no tool call.
"""

from __future__ import annotations

import pydantic

from agentloops._problems import Problems, listed
from agentloops._text import cut, quoted
from agentloops.engine.subruns import AgentTool
from agentloops.rewoo._placeholders import STEP_ID, masked_errors, references
from agentloops.rewoo._scheduler import cycles
from agentloops.rewoo.schema import ReWOOPlan, ReWOOPlanStep
from agentloops.tools import Tool, ToolRegistry


def asks_a_person(tool: Tool) -> bool:
    """Whether a call of `tool` may wait for a person (it needs approval, or it is an agent
    tool whose loop may pause): the ReWOO worker cannot wait, so its plans may not use it."""
    if tool.requires_approval is not False:
        return True
    return isinstance(tool, AgentTool) and tool.may_pause()


def rewoo_problems(plan: ReWOOPlan, registry: ToolRegistry, max_steps: int) -> list[str]:
    """Every reason `plan` must not run (the first `MAX_PROBLEMS`, then a count)."""
    steps = plan.steps
    if not steps:
        return ["the plan has no steps: plan at least one tool call"]
    problems = Problems()
    if len(steps) > max_steps:
        problems.add(f"the plan has {len(steps)} steps; max_steps={max_steps}")
    positions: dict[str, list[int]] = {}
    for i, s in enumerate(steps, 1):
        positions.setdefault(s.step_id, []).append(i)
    for step_id, at in positions.items():
        if len(at) > 1:
            problems.add(
                f"step_id {quoted(step_id, 40)} is used by {len(at)} steps (positions {listed(at)})"
            )
    usable = ", ".join(t.name for t in registry if not asks_a_person(t)) or "(none)"
    for position, step in enumerate(steps, 1):
        problems.extend(_step_problems(position, step, positions, registry, usable))
    graph: dict[str, list[str]] = {}
    for s in steps:  # self-dependencies and unknown ids are reported per step
        graph.setdefault(s.step_id, []).extend(
            d for d in s.depends_on if d != s.step_id and d in positions
        )
    for path in cycles(graph):
        problems.add(f"dependency cycle {' -> '.join(path)}: none of these steps can start")
    return problems.listed()


def _step_problems(
    position: int,
    step: ReWOOPlanStep,
    known: dict[str, list[int]],
    registry: ToolRegistry,
    usable: str,
) -> list[str]:
    sid = step.step_id
    if STEP_ID.fullmatch(sid):
        label, problems = _short(sid), []
    else:
        label = f"step {position} ({quoted(sid, 40)})"
        problems = [f"{label}: step_id must be #E and a positive number: #E1, #E2, ..."]
    tool = registry.get(step.tool_name)
    if tool is None:
        problems.append(f"{label}: unknown tool {quoted(step.tool_name, 60)}; available: {usable}")
    elif asks_a_person(tool):
        what = "may pause for" if tool.hosted else "requires"
        problems.append(
            f"{label}: tool {tool.name!r} {what} human approval, which the ReWOO worker "
            "cannot ask for; run it with ReActLoop or PlanAndExecute instead"
        )
    else:
        try:
            tool.validate(step.tool_args)
        except pydantic.ValidationError as exc:
            errors = masked_errors(exc)
            if errors:
                problems.append(f"{label}: tool_args fail {tool.name!r}: {'; '.join(errors)}")
    explicit = "depends_on" in step.model_fields_set  # a derived list holds no mistakes
    depends_on = set(step.depends_on)
    if explicit:
        for dep in dict.fromkeys(step.depends_on):
            if dep == sid:
                problems.append(f"{label}: depends on itself")
            elif dep not in known:
                problems.append(
                    f"{label}: depends_on names {quoted(dep, 40)}, which is no step of the plan"
                )
    for ref in references(step.tool_args):
        if ref == sid:
            if sid not in depends_on:
                problems.append(f"{label}: tool_args use its own output {_short(ref)}")
        elif ref not in known:
            problems.append(f"{label}: tool_args use {_short(ref)}, which is no step of the plan")
        elif ref not in depends_on:
            problems.append(f"{label}: tool_args use {ref}, but depends_on does not list it")
    return problems


def _short(step_id: str) -> str:
    """A step id as a problem names it: a huge one cut (`_text.cut`), unquoted."""
    return cut(step_id, 40, "[...]", tail=False)
