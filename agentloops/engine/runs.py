"""What every run shares, written once for all loops: the running totals, the model call
that adds to them, and the run's life (start and finish events, the partial result
attached to a failure).

Rule: shared by the loops' machines; no I/O, and no loop's own decisions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agentloops.engine.effects import CallModel, Emit, Machine, NextTool, StartTool
from agentloops.errors import AgentLoopsError
from agentloops.events import RunFinished, RunStarted
from agentloops.messages import ToolCall, ToolOutcome
from agentloops.model import ModelClient, ModelRequest, ModelResponse
from agentloops.usage import Usage


class RunRecord(Protocol):
    """What every loop's result carries."""

    @property
    def stop_reason(self) -> str: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def model_calls(self) -> int: ...


T = TypeVar("T", bound=RunRecord)
Clock = Callable[[], float]


class Totals:
    """A run's running totals: tokens and model calls (and tool calls, where counted).

    Counts are kept as plain integers (a `Usage` is built when asked for), so adding a
    step's usage costs no allocation.
    """

    __slots__ = ("cache_read", "cache_write", "input", "model_calls", "output", "tool_calls")

    def __init__(self, *, usage: Usage | None = None, model_calls: int = 0, tool_calls: int = 0):
        if usage is None:  # a new run: no Usage() to build and read back (once per run)
            self.input = self.output = self.cache_read = self.cache_write = 0
        else:
            self.input, self.output = usage.input_tokens, usage.output_tokens
            self.cache_read, self.cache_write = usage.cache_read_tokens, usage.cache_write_tokens
        self.model_calls = model_calls
        self.tool_calls = tool_calls

    @property
    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input,
            output_tokens=self.output,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
        )

    @property
    def total_tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def spend(self, usage: Usage, model_calls: int = 1) -> None:
        self.input += usage.input_tokens
        self.output += usage.output_tokens
        self.cache_read += usage.cache_read_tokens
        self.cache_write += usage.cache_write_tokens
        self.model_calls += model_calls


class Stop(AgentLoopsError):
    """Thrown into a run's machine to end it with `stop_reason` ("budget", "deadline"):
    not a failure, so the run's `lifecycle` gives its partial result that stop reason, and
    whoever threw it returns that result instead of raising (`engine.meter`)."""

    def __init__(self, stop_reason: str, detail: str):
        super().__init__(detail)
        self.stop_reason = stop_reason
        self.detail = detail


def call_model(
    client: ModelClient, request: ModelRequest, totals: Totals, loop: str, run_id: str
) -> Machine[ModelResponse]:
    """Ask the driver for one model call, and add what it cost to `totals`."""
    response: ModelResponse = yield CallModel(client, request, loop, run_id, totals.model_calls)
    totals.spend(response.usage)
    return response


def lifecycle(
    body: Machine[T],
    *,
    loop: str,
    run_id: str,
    observed: bool,
    clock: Clock,
    partial: Callable[[AgentLoopsError], Any],
    parent_run_id: str | None = None,
) -> Machine[T]:
    """Run `body` between `RunStarted` and `RunFinished` (when `observed`).

    A failure gets `partial(exc)` as its `.result`, so nothing done is lost, and still
    ends the run's events (with that result's stop reason) before it propagates. A `Stop`
    gets the partial result with the stop's reason and detail.
    """
    started = clock()
    try:
        if observed:
            yield Emit(RunStarted(loop=loop, run_id=run_id, parent_run_id=parent_run_id))
        result = yield from body
    except AgentLoopsError as exc:
        exc.result = partial(exc)
        if isinstance(exc, Stop):
            exc.result = dataclasses.replace(
                exc.result, stop_reason=exc.stop_reason, detail=exc.detail
            )
        if observed:
            yield Emit(_finished(loop, run_id, exc.result, clock() - started))
        raise
    if observed:
        yield Emit(_finished(loop, run_id, result, clock() - started))
    return result


def _finished(loop: str, run_id: str, result: RunRecord, seconds: float) -> RunFinished:
    return RunFinished(
        loop=loop,
        run_id=run_id,
        stop_reason=result.stop_reason,
        usage=result.usage,
        model_calls=result.model_calls,
        seconds=seconds,
    )


def run_tools(
    calls: list[ToolCall], limit: int, loop: str, run_id: str
) -> Machine[dict[str, ToolOutcome]]:
    """Run `calls`, at most `limit` at a time; each call's outcome by id."""
    outcomes: dict[str, ToolOutcome] = {}
    if not calls:
        return outcomes
    started = min(limit, len(calls))
    for call in calls[:started]:
        yield StartTool(call, loop, run_id)
    while len(outcomes) < len(calls):
        call_id, outcome = yield NextTool(loop, run_id)
        outcomes[call_id] = outcome
        if started < len(calls):
            yield StartTool(calls[started], loop, run_id)
            started += 1
    return outcomes
