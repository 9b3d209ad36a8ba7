"""What both drivers share: the events they make around the effects they perform, and
the failed sink's error they hold until the machine next asks for new work (`Halt`).

Rule: no I/O and no decision: it builds events.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agentloops import _pool
from agentloops.engine.effects import CallModel, CheckGuard, CheckOutput, Decide, Emit, StartTool
from agentloops.errors import ConfigurationError, GuardrailTripped
from agentloops.events import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from agentloops.messages import ToolOutcome
from agentloops.model import ModelResponse
from agentloops.tools._runtime import finish


def model_started(e: CallModel) -> ModelCallStarted:
    return ModelCallStarted(
        loop=e.loop,
        run_id=e.run_id,
        parent_run_id=e.parent_run_id,
        step=e.step,
        messages=len(e.request.messages),
    )


def model_finished(e: CallModel, response: ModelResponse, seconds: float) -> ModelCallFinished:
    pricer = e.pricer
    return ModelCallFinished(
        loop=e.loop,
        run_id=e.run_id,
        parent_run_id=e.parent_run_id,
        step=e.step,
        stop_reason=response.stop_reason,
        usage=response.usage,
        model=response.model,
        seconds=seconds,
        attempts=response.attempts,
        role=e.role,
        cost=None if pricer is None else response.usage.cost(pricer(response)),
        usage_reported=response.usage_reported,
    )


def tool_started(e: StartTool) -> ToolCallStarted:
    c = e.call
    return ToolCallStarted(
        loop=e.loop,
        run_id=e.run_id,
        parent_run_id=e.parent_run_id,
        call_id=c.id,
        name=c.name,
        args=c.args,
    )


def tool_finished(e: StartTool, outcome: ToolOutcome) -> ToolCallFinished:
    c = e.call
    return ToolCallFinished(
        loop=e.loop,
        run_id=e.run_id,
        parent_run_id=e.parent_run_id,
        call_id=c.id,
        name=c.name,
        outcome=outcome,
    )


def delta(part: Event, e: CallModel) -> Event:
    """A client's delta, stamped with the run it belongs to."""
    return dataclasses.replace(part, loop=e.loop, run_id=e.run_id, parent_run_id=e.parent_run_id)


def lost(exc: BaseException) -> ToolOutcome:
    """The outcome of a step an executor failed to run (its failure, not the run's)."""
    text = f"the executor could not run this step: {type(exc).__name__}: {exc}"
    return ToolOutcome(content=text, is_error=True)


def cancelled(exc: BaseException) -> ToolOutcome:
    """The outcome of a call whose task was cancelled, not by its run (its failure)."""
    text = f"the call was cancelled, not by this run: {type(exc).__name__}: {exc}"
    return ToolOutcome(content=text, is_error=True)


class Halt:
    """The error of a sink that failed (a full disk under a `JSONLSink`), which ends the run.

    A driver's `run` keeps it here rather than throwing it where the event was made, so
    what was under way when the write failed is not lost: a model call's response, a tool
    call's outcome (already made) still reach the machine (and a durable run's journal).
    The driver raises it into the machine at the next new work: a model call, an output
    check, a decision, an event, or a wait for a tool call that has not come back. Calls
    not yet started do not start.
    """

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: Exception | None = None

    def check(self) -> None:
        """Raise the sink's error, if it failed."""
        if self.error is not None:
            raise self.error


HALTS_AT = (CallModel, CheckOutput, CheckGuard, Decide, Emit)
"""The effects a failed sink's error is raised at (a wait for a tool call: when none is in)."""


def check(effect: CheckOutput) -> Any:
    """Perform a `CheckOutput` here: call the validator (an async one runs to completion)."""
    value = effect.validator(effect.value, effect.context)
    if inspect.isawaitable(value):
        value = finish(_awaited(value))
    return value


async def acheck(effect: CheckOutput) -> Any:
    """Perform a `CheckOutput` on the event loop: an async validator is awaited, a sync one
    runs on agentloops' pool (as a sync tool does)."""
    validator = effect.validator
    if inspect.iscoroutinefunction(validator):
        return await validator(effect.value, effect.context)
    value = await _pool.call(validator, effect.value, effect.context)
    if inspect.isawaitable(value):
        value = await value
    return value


def guard(effect: CheckGuard) -> str | None:
    """Perform a guard's check here (an async one runs to completion): why it trips, or
    `None`."""
    try:
        verdict = effect.check(effect.value, effect.context)
        if inspect.isawaitable(verdict):
            verdict = finish(_awaited(verdict))
    except GuardrailTripped as tripped:
        return tripped.reason
    return _reason(effect, verdict)


async def aguard(effect: CheckGuard) -> str | None:
    """`guard` on the event loop: an async check is awaited, a sync one runs on agentloops'
    pool (as a sync tool does)."""
    check = effect.check
    try:
        if inspect.iscoroutinefunction(check):
            verdict = await check(effect.value, effect.context)
        else:
            verdict = await _pool.call(check, effect.value, effect.context)
            if inspect.isawaitable(verdict):
                verdict = await verdict
    except GuardrailTripped as tripped:
        return tripped.reason
    return _reason(effect, verdict)


def _reason(effect: CheckGuard, verdict: Any) -> str | None:
    if verdict is None or (isinstance(verdict, str) and verdict):
        return verdict
    raise ConfigurationError(
        f"guard {effect.guard!r}: a check returns None (pass) or a reason (a non-empty "
        f"string), got {verdict!r}"
    )


def tripped(effect: CheckGuard, reason: str) -> GuardrailTripped:
    return GuardrailTripped(reason, guard=effect.guard, stage=effect.stage)


async def _awaited(value: Any) -> Any:
    return await value
