"""The ReWOO worker: runs a validated plan's tool calls, never the model.

Each step is started by the dependency-ready scheduler the moment its dependencies are
done, with their outputs substituted for its placeholders. A failed step's dependents
are not run, and their evidence says which dependency failed.

Rule: no model call: the worker runs tools only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from agentloops._text import cut
from agentloops.engine.effects import Emit, Machine, StartTool
from agentloops.engine.subruns import paused
from agentloops.events import StepFinished, StepStarted
from agentloops.messages import ToolCall, ToolOutcome
from agentloops.rewoo._placeholders import looks_like_json, substitute
from agentloops.rewoo._scheduler import GraphRun, run_graph
from agentloops.rewoo.schema import ReWOOPlan, ReWOOPlanStep
from agentloops.tools import ToolRegistry

_LOOP = "rewoo"

OnFinish = Callable[[str, ToolOutcome], Iterable[Emit]]

NOT_RUN = "not run: "
"""Starts the evidence text of a step that was not run because a dependency failed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Work:
    """What the worker did with a plan."""

    evidence: dict[str, ToolOutcome]
    """Outcomes in plan order; an aborted run leaves out the steps never started."""
    skipped: list[str]
    """Steps not run because a dependency failed."""
    aborted_by: str | None
    """The failed step that stopped an `abort` run."""

    def failures(self, plan: ReWOOPlan) -> list[str]:
        """The failed steps, as problems to show a planner."""
        tools = {s.step_id: s.tool_name for s in plan.steps}
        return [
            f"{sid} ({tools[sid]}) failed: {cut(o.content, 500)}"
            for sid, o in self.evidence.items()
            if o.is_error and sid not in self.skipped
        ]


def work_machine(
    plan: ReWOOPlan,
    registry: ToolRegistry,
    *,
    limit: int,
    abort: bool,
    observed: bool,
    run_id: str,
    attempt: int = 0,
    progress: dict[str, ToolOutcome] | None = None,
) -> Machine[Work]:
    """Run a validated plan: each step as soon as its dependencies are done, at most
    `limit` at once. The driver decides where the calls run. `attempt` (how many times
    the run re-planned before this plan) keeps the calls' idempotency keys unique.
    `progress` gets each outcome as it arrives, so a run stopped part-way (by an error,
    or a status read at the journal's end) still has the steps that finished."""
    steps = {s.step_id: s for s in plan.steps}

    def start(step_id: str, results: Mapping[str, ToolOutcome]) -> StartTool:
        step = steps[step_id]
        args = step.tool_args
        if step.depends_on:  # validation guarantees every placeholder is a dependency
            args = _substituted(registry, step, {d: results[d].content for d in step.depends_on})
        key = f"{run_id}:plan{attempt}:{step_id}"
        return StartTool(ToolCall(step_id, step.tool_name, args), _LOOP, run_id, key)

    hooks = _hooks(run_id, steps) if observed else {}
    if progress is not None:
        hooks["on_finish"] = _kept_in(progress, hooks.get("on_finish"))
    graph = yield from run_graph(
        {s.step_id: s.depends_on for s in plan.steps},
        start,
        limit=limit,
        checked=True,  # the plan was validated: no unknown dependency, no cycle
        failed=_is_error,
        abort_on_failure=abort,
        **hooks,
    )
    return _collect(plan, graph)


def _kept_in(progress: dict[str, ToolOutcome], then: OnFinish | None) -> OnFinish:
    """An `on_finish` hook that keeps each outcome in `progress`, then calls `then`."""

    def on_finish(step_id: str, outcome: ToolOutcome) -> Iterable[Emit]:
        progress[step_id] = outcome
        return then(step_id, outcome) if then is not None else ()

    return on_finish


def _substituted(registry: ToolRegistry, step: ReWOOPlanStep, outputs: dict[str, str]) -> Any:
    """Arguments with outputs substituted: as text, or as parsed JSON where only that fits.

    The registry validates them again before the call, so arguments that fit neither
    way become this step's error outcome (naming the field), not an exception.
    """
    args = substitute(step.tool_args, outputs)
    if not any(looks_like_json(text) for text in outputs.values()):
        return args  # the common case: only text to substitute, nothing to choose
    parsed = substitute(step.tool_args, outputs, parse_json=True)
    tool = registry.get(step.tool_name)
    if parsed == args or tool is None:  # no JSON output fills a whole value
        return args
    for candidate in (args, parsed):
        try:
            tool.validate(candidate)
            return candidate
        except pydantic.ValidationError:
            continue
    return args


def _is_error(outcome: ToolOutcome) -> bool:
    # A sub-run that paused for a person gave no evidence: the worker cannot wait for one.
    return outcome.is_error or paused(outcome.run)


def _skip_text(dep: str, root: str) -> str:
    if dep == root:
        return f"{NOT_RUN}it depends on {dep}, which failed"
    return f"{NOT_RUN}it depends on {dep}, which was not run because {root} failed"


def _collect(plan: ReWOOPlan, graph: GraphRun[str, ToolOutcome]) -> Work:
    evidence: dict[str, ToolOutcome] = {}
    skipped: list[str] = []
    for step in plan.steps:
        sid = step.step_id
        if sid in graph.results:
            evidence[sid] = graph.results[sid]
        elif sid in graph.skipped:
            skipped.append(sid)
            text = _skip_text(graph.skipped[sid], graph.root_cause(sid))
            evidence[sid] = ToolOutcome(content=text, is_error=True)
    return Work(evidence=evidence, skipped=skipped, aborted_by=graph.aborted_by)


def _hooks(run_id: str, steps: Mapping[str, ReWOOPlanStep]) -> dict[str, Any]:
    """Scheduler hooks that turn starts, finishes and skips into step events (the driver
    adds the tool-call events around each call)."""

    def finished(step_id: str, ok: bool, seconds: float, summary: str) -> list[Emit]:
        event = StepFinished(
            loop=_LOOP, run_id=run_id, step_id=step_id, ok=ok, seconds=seconds, summary=summary
        )
        return [Emit(event)]

    def on_start(step_id: str) -> list[Emit]:
        description = steps[step_id].description
        return [
            Emit(StepStarted(loop=_LOOP, run_id=run_id, step_id=step_id, description=description))
        ]

    def on_finish(step_id: str, outcome: ToolOutcome) -> list[Emit]:
        return finished(step_id, not outcome.is_error, outcome.seconds, outcome.content[:200])

    def on_skip(step_id: str, dep: str, root: str) -> list[Emit]:
        return finished(step_id, False, 0.0, _skip_text(dep, root))

    return {"on_start": on_start, "on_finish": on_finish, "on_skip": on_skip}
