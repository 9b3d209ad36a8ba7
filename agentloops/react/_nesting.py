"""A ReAct run's sub-runs, as its machine decides about them: an agent tool's outcome
rolled up into the run, the calls of paused sub-runs joining the run's pending calls (with
the path of runs down to each), the decisions that resume each paused sub-run, and the
turn that hands the conversation to another loop.

Rule: decisions only, no I/O: the driver runs the sub-runs (`agentloops.engine`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentloops.engine.effects import SubStart
from agentloops.engine.runs import Totals
from agentloops.engine.subruns import AgentTool, paused
from agentloops.errors import ConfigurationError
from agentloops.messages import Message, SubRun, ToolCall, ToolOutcome, ToolResult
from agentloops.tools import ToolRegistry

HANDED = "Transferred: {name} continues the conversation from here."
NOT_HANDED = "not run: the conversation was handed over to {name} in this turn"


def collected(
    subruns: list[SubRun],
    totals: Totals,
    calls: list[ToolCall],
    outcomes: Mapping[str, ToolOutcome],
    answer: Callable[[ToolCall, ToolOutcome], ToolResult],
) -> tuple[list[ToolResult], list[SubRun]]:
    """The results of calls that ran (`answer` makes each), and the sub-runs that paused
    (their calls have no result yet); every sub-run's spending goes into `totals`, and the
    run keeps it."""
    results: list[ToolResult] = []
    waiting: list[SubRun] = []
    for c in calls:
        outcome = outcomes[c.id]
        run = outcome.run
        if run is not None:
            totals.absorb(run)
            subruns.append(run)
            if paused(run):
                waiting.append(run)
                continue
        results.append(answer(c, outcome))
    return results, waiting


def pending_of(
    run_id: str, own: list[ToolCall], waiting: list[SubRun]
) -> tuple[list[ToolCall], dict[str, tuple[str, ...]]]:
    """Every call a paused turn waits for, and the path of runs to each, by the key a
    decision names it with: its id, or `RUN_ID:CALL_ID` for an id another pending call has."""
    calls = list(own)
    paths: dict[str, tuple[str, ...]] = {c.id: (run_id,) for c in own}
    for run in waiting:
        for key, call in zip(run.paths, run.pending, strict=True):
            path = (run_id, *run.paths[key])
            name = key if key not in paths else f"{path[-1]}:{call.id}"
            calls.append(call)
            paths[name] = path
    return calls, paths


def resumed(
    waiting: list[SubRun], paths: Mapping[str, tuple[str, ...]], decisions: Mapping[str, bool]
) -> dict[str, SubStart]:
    """How each paused sub-run resumes: its saved state, with the decisions on its calls
    (named as the sub-run names them)."""
    keys = list(paths)
    starts: dict[str, SubStart] = {}
    for run in waiting:
        if run.state is None:
            raise ConfigurationError(
                f"the sub-run {run.run_id!r} of {run.name!r} paused in a durable run: resume "
                "the top run by its id"
            )
        own: dict[str, bool] = {}
        for key, call in zip(run.paths, run.pending, strict=True):
            path = run.paths[key]
            name = next(k for k in keys if paths[k][1:] == path and k.rsplit(":", 1)[-1] == call.id)
            own[key] = decisions[name]
        starts[run.call_id] = SubStart(state=run.state, decisions=own)
    return starts


def handoff_in(tools: ToolRegistry, calls: list[ToolCall]) -> ToolCall | None:
    """The turn's first call of a handoff, if it has one."""
    hosted = tools.hosted
    for c in calls:
        if c.name in hosted:
            t = tools.get(c.name)
            if isinstance(t, AgentTool) and t.handoff:
                return c
    return None


def handover_turn(
    tools: ToolRegistry, messages: list[Message], asked: list[ToolCall], call: ToolCall
) -> tuple[list[ToolResult], Any]:
    """A handoff's turn: its results (the handoff's note, every other call not run), and
    the target's task: the conversation so far with that turn, through the handoff's
    `input_filter`."""
    t = tools.get(call.name)
    assert isinstance(t, AgentTool)
    target = t.target_name
    results = [
        ToolResult(c.id, HANDED.format(name=target))
        if c.id == call.id
        else ToolResult(c.id, NOT_HANDED.format(name=target), True)
        for c in asked
    ]
    transcript = [*messages, Message("user", tuple(results))]
    task = transcript if t.input_filter is None else list(t.input_filter(transcript))
    return results, task
