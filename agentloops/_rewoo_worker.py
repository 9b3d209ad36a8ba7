"""The ReWOO worker: runs a validated plan's tool calls on an executor, never the model.

Each step is dispatched by the dependency-ready scheduler the moment its dependencies
are done, with their outputs substituted for its placeholders. A failed step's
dependents are not run, and their evidence says which dependency failed.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pydantic

from agentloops._pickling import ensure_picklable, pickler_for
from agentloops._placeholders import looks_like_json, substitute
from agentloops._rewoo_plan import ReWOOPlan, ReWOOPlanStep
from agentloops._scheduler import GraphRun, Task, run_graph
from agentloops.events import (
    EventSink,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from agentloops.tools import ToolOutcome, ToolRegistry

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
            f"{sid} ({tools[sid]}) failed: {o.content:.500}"
            for sid, o in self.evidence.items()
            if o.is_error and sid not in self.skipped
        ]


def work_plan(
    plan: ReWOOPlan,
    registry: ToolRegistry,
    *,
    executor: Executor,
    abort: bool,
    on_event: EventSink | None,
    run_id: str,
) -> Work:
    """Run a validated plan: each step as soon as its dependencies are done."""
    steps = {s.step_id: s for s in plan.steps}
    # A thread pool gets the caller's contextvars; any other executor gets plain calls
    # (a bound `ToolRegistry.call` and its arguments) that pickle for a remote worker.
    in_threads = isinstance(executor, ThreadPoolExecutor)
    calls = {} if in_threads else _remote_calls(plan, registry, executor)
    sent: dict[str, Any] = {}  # the arguments each call got, for the events

    def prepare(step_id: str, results: Mapping[str, ToolOutcome]) -> Task:
        step = steps[step_id]
        args = step.tool_args
        if step.depends_on:  # validation guarantees every placeholder is a dependency
            args = _substituted(registry, step, {d: results[d].content for d in step.depends_on})
        if on_event is not None:
            sent[step_id] = args
        if in_threads:
            return contextvars.copy_context().run, (registry.call, step.tool_name, args)
        return calls.get(step.tool_name, registry.call), (step.tool_name, args)

    hooks = {} if on_event is None else _hooks(on_event, run_id, steps, sent)
    graph = run_graph(
        {s.step_id: s.depends_on for s in plan.steps},
        prepare,
        executor=executor,
        checked=True,  # the plan was validated: no unknown dependency, no cycle
        failed=_is_error,
        abort_on_failure=abort,
        **hooks,
    )
    return _collect(plan, graph)


def _remote_calls(
    plan: ReWOOPlan, registry: ToolRegistry, executor: Executor
) -> dict[str, Callable[[str, dict[str, Any]], ToolOutcome]]:
    """For a process or cluster executor: a one-tool registry per planned tool, so only
    the tools the plan uses travel, each checked before anything is submitted.

    Raises:
        ConfigurationError: a planned tool cannot be pickled for `executor` (named).
    """
    if pickler_for(executor) is None:
        return {}
    calls: dict[str, Callable[[str, dict[str, Any]], ToolOutcome]] = {}
    for name in dict.fromkeys(s.tool_name for s in plan.steps):
        tool = registry.get(name)
        if tool is not None:
            one = ToolRegistry([tool], max_output_chars=registry.max_output_chars)
            ensure_picklable(one, f"tool {name!r}", executor=executor)
            calls[name] = one.call
    return calls


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
    return outcome.is_error


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
        elif sid in graph.errors:
            evidence[sid] = _lost(graph.errors[sid])
        elif sid in graph.skipped:
            skipped.append(sid)
            text = _skip_text(graph.skipped[sid], graph.root_cause(sid))
            evidence[sid] = ToolOutcome(content=text, is_error=True)
    return Work(evidence=evidence, skipped=skipped, aborted_by=graph.aborted_by)


def _lost(exc: BaseException) -> ToolOutcome:
    text = f"the executor could not run this step: {type(exc).__name__}: {exc}"
    return ToolOutcome(content=text, is_error=True)


def _hooks(
    sink: EventSink, run_id: str, steps: Mapping[str, ReWOOPlanStep], sent: Mapping[str, Any]
) -> dict[str, Any]:
    """Scheduler hooks that turn dispatch, completion and skips into step events, and
    each call into tool-call events (so tools are counted as in the other loops)."""

    def finished(step_id: str, ok: bool, seconds: float, summary: str) -> None:
        sink(
            StepFinished(
                loop="rewoo",
                run_id=run_id,
                step_id=step_id,
                ok=ok,
                seconds=seconds,
                summary=summary,
            )
        )

    def on_start(step_id: str) -> None:
        step = steps[step_id]
        sink(
            StepStarted(loop="rewoo", run_id=run_id, step_id=step_id, description=step.description)
        )
        sink(
            ToolCallStarted(
                loop="rewoo",
                run_id=run_id,
                call_id=step_id,
                name=step.tool_name,
                args=sent[step_id],
            )
        )

    def on_finish(step_id: str, value: ToolOutcome | BaseException) -> None:
        outcome = _lost(value) if isinstance(value, BaseException) else value
        name = steps[step_id].tool_name
        sink(
            ToolCallFinished(
                loop="rewoo", run_id=run_id, call_id=step_id, name=name, outcome=outcome
            )
        )
        finished(step_id, not outcome.is_error, outcome.seconds, outcome.content[:200])

    def on_skip(step_id: str, dep: str, root: str) -> None:
        finished(step_id, False, 0.0, _skip_text(dep, root))

    return {"on_start": on_start, "on_finish": on_finish, "on_skip": on_skip}
