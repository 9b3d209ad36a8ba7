"""What every run shares, written once for all loops: the running totals, the model call
that adds to them, the nudge after an empty reply, the tool calls of a turn, the run's
life (start and finish events, the partial result attached to a failure), and the mark a
run inside another puts on its events.

Rule: shared by the loops' machines; no I/O, and no loop's own decisions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from agentloops.engine.effects import (
    CallModel,
    Emit,
    Machine,
    NextTool,
    OutputTarget,
    StartTool,
    SubStart,
)
from agentloops.errors import AgentLoopsError
from agentloops.events import RunFinished, RunStarted
from agentloops.messages import Message, SubRun, Text, ToolCall, ToolOutcome
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

    Every model call a machine makes adds to them through `call_model`, structured and
    text calls included, so no loop adds a reply's usage by hand. Counts are kept as plain
    integers (a `Usage` is built when asked for), so a step's usage costs no allocation.
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

    def spend(self, usage: Usage) -> None:
        """Add one model call and what it cost."""
        self.input += usage.input_tokens
        self.output += usage.output_tokens
        self.cache_read += usage.cache_read_tokens
        self.cache_write += usage.cache_write_tokens
        self.model_calls += 1

    def absorb(self, run: SubRun, sign: int = 1) -> None:
        """Add what a finished sub-run spent (an agent tool's, a handoff's): its usage, model
        calls and tool calls (take them away again with `sign=-1`: a paused sub-run's share,
        before it resumes and reports all it spent)."""
        u = run.usage
        self.input += sign * u.input_tokens
        self.output += sign * u.output_tokens
        self.cache_read += sign * u.cache_read_tokens
        self.cache_write += sign * u.cache_write_tokens
        self.model_calls += sign * run.model_calls
        self.tool_calls += sign * run.tool_calls

    def mark(self) -> Mark:
        """Where the totals stand now; `since` tells what was spent after it."""
        return (self.input, self.output, self.cache_read, self.cache_write, self.model_calls)

    def since(self, mark: Mark) -> tuple[Usage, int]:
        """The usage and the model calls spent since `mark` (one structured answer's cost)."""
        input_, output, cache_read, cache_write, calls = mark
        spent = Usage(
            input_tokens=self.input - input_,
            output_tokens=self.output - output,
            cache_read_tokens=self.cache_read - cache_read,
            cache_write_tokens=self.cache_write - cache_write,
        )
        return spent, self.model_calls - calls


Mark = tuple[int, int, int, int, int]
"""`Totals.mark()`: the four token counts and the model calls, at one moment."""


class Stop(AgentLoopsError):
    """Thrown into a run's machine to end it with `stop_reason` ("budget", "deadline"):
    not a failure, so the run's `lifecycle` gives its partial result that stop reason, and
    whoever threw it returns that result instead of raising (`engine.meter`)."""

    def __init__(self, stop_reason: str, detail: str):
        super().__init__(detail)
        self.stop_reason = stop_reason
        self.detail = detail


def call_model(
    client: ModelClient,
    request: ModelRequest,
    totals: Totals,
    loop: str,
    run_id: str,
    step: int | None = None,
    *,
    output: OutputTarget | None = None,
) -> Machine[ModelResponse]:
    """The one way a machine calls a model: ask the driver for the call, and add what it
    cost to `totals`. `step` numbers the call for its events and the journal (default: the
    calls counted so far); a structured answer numbers its own attempts from 0. What the
    call is for is its request's `role` ("planner", "solver"...: the cost per role).
    `output`: the reply may be the run's typed answer (a streaming driver parses it as it
    comes).

    ReAct's step, the one hot path, yields the same `CallModel` and calls the same
    `Totals.spend` itself: this generator would cost it about 3% of a step.
    """
    if step is None:
        step = totals.model_calls
    call = CallModel(client, request, loop, run_id, step, output=output)
    response: ModelResponse = yield call
    totals.spend(response.usage)
    return response


def empty(response: ModelResponse) -> bool:
    """Whether a reply finished normally with no text at all (blank text counts as none)."""
    return (
        response.stop_reason in ("end_turn", "stop_sequence") and not response.message.text.strip()
    )


EMPTY_NUDGE = "Your reply was empty. Answer the task"


def nudge(messages: list[Message], reply: Message, *, tools: bool) -> None:
    """Ask once more after an empty `reply`, on `messages` (changed in place), keeping the
    transcript valid: what the reply held besides text (thinking) is kept and the note
    follows it; with nothing to keep, the note joins the last user turn. `tools` says
    whether the request offers tools, and so whether the note suggests one.
    """
    note = Text(f"{EMPTY_NUDGE}, or call a tool." if tools else f"{EMPTY_NUDGE}.")
    kept = tuple(b for b in reply.content if type(b) is not Text)  # e.g. thinking
    if kept:
        messages.append(Message("assistant", kept))
        messages.append(Message("user", (note,)))
    else:
        last = messages[-1]
        messages[-1] = Message("user", (*last.content, note))


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
    gets the partial result with the stop's reason and detail. A failure at the last
    event (a sink that could not write it) gets its partial result too.
    """
    started = clock()
    try:
        if observed:
            yield Emit(RunStarted(loop=loop, run_id=run_id, parent_run_id=parent_run_id))
        result = yield from body
        if observed:
            yield Emit(_finished(loop, run_id, result, clock() - started))
    except AgentLoopsError as exc:
        exc.result = partial(exc)
        if isinstance(exc, Stop):
            exc.result = dataclasses.replace(
                exc.result, stop_reason=exc.stop_reason, detail=exc.detail
            )
        if observed:
            yield Emit(_finished(loop, run_id, exc.result, clock() - started))
        raise
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
    calls: list[ToolCall],
    limit: int,
    loop: str,
    run_id: str,
    starts: Mapping[str, SubStart] | None = None,
    outcomes: dict[str, ToolOutcome] | None = None,
) -> Machine[dict[str, ToolOutcome]]:
    """Run `calls`, at most `limit` at a time; each call's outcome by id, kept in
    `outcomes` (when given) as it arrives, so a run failing part-way still has them.
    `starts` says how the sub-runs of some hosted calls start (a handoff's transcript, a
    paused sub-run)."""
    if outcomes is None:
        outcomes = {}
    if not calls:
        return outcomes
    started = min(limit, len(calls))
    for call in calls[:started]:
        yield _start(call, loop, run_id, starts)
    while len(outcomes) < len(calls):
        call_id, outcome = yield NextTool(loop, run_id)
        outcomes[call_id] = outcome
        if started < len(calls):
            yield _start(calls[started], loop, run_id, starts)
            started += 1
    return outcomes


def _start(
    call: ToolCall, loop: str, run_id: str, starts: Mapping[str, SubStart] | None
) -> StartTool:
    if starts is None:
        return StartTool(call, loop, run_id)
    return StartTool(call, loop, run_id, start=starts.get(call.id))


def nested(machine: Machine[T], parent_run_id: str, call_id: str = "") -> Machine[T]:
    """`machine`, a run inside another (a Plan-and-Execute step, an agent tool's sub-run):
    every event it makes names `parent_run_id`, and its `RunStarted` the parent's tool call
    `call_id` it answers. Closing this closes `machine`."""
    outcome: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                effect = machine.send(outcome) if error is None else machine.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            outcome, error = None, None
            kind = type(effect)
            if kind is Emit:
                effect = Emit(_stamped(effect.event, parent_run_id, call_id))  # type: ignore[union-attr]
            elif (kind is CallModel or kind is StartTool) and effect.parent_run_id is None:  # type: ignore[union-attr]
                effect.parent_run_id = parent_run_id  # type: ignore[union-attr]
            try:
                outcome = yield effect
            except Exception as exc:  # the machine decides, as under any driver
                error = exc
    finally:
        machine.close()


def _stamped(event: Any, parent_run_id: str, call_id: str) -> Any:
    if type(event) is RunStarted:
        if event.parent_call_id or not call_id:
            return (
                event
                if event.parent_run_id
                else dataclasses.replace(event, parent_run_id=parent_run_id)
            )
        return dataclasses.replace(
            event, parent_run_id=event.parent_run_id or parent_run_id, parent_call_id=call_id
        )
    if event.parent_run_id is None:
        return dataclasses.replace(event, parent_run_id=parent_run_id)
    return event
