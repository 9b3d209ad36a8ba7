"""A run's middleware chain, applied to its machine: `Chain` (the hooks, sorted once per
loop) and `chained(machine, chain, ...)`, the wrapper that runs them around each model and
tool call the machine asks for.

The wrapper sits inside the run's meter and durable wrapper (a loop applies it where it
builds the machine), so the calls its hooks make are metered and journaled like the run's
own, and a replay recomputes every hook. A hook that raises `GuardrailTripped` stops the
run with stop reason "guardrail" (thrown into the machine as a `Stop`, which its
lifecycle turns into the partial result, returned here) and a `GuardTripped` event.

Rule: it knows effects, hooks and `Stop`; no loop, no driver, no I/O.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agentloops.engine.effects import CallModel, Emit, Machine, NextTool, R, StartTool
from agentloops.engine.runs import Stop, Totals
from agentloops.errors import ConfigurationError, GuardrailTripped, ModelError
from agentloops.events import GuardTripped
from agentloops.messages import Message, ToolCall, ToolOutcome
from agentloops.middleware.hooks import (
    Middleware,
    MiddlewareContext,
    fingerprint_of,
    name_of,
    overrides,
)
from agentloops.model import ModelResponse

if TYPE_CHECKING:
    from agentloops.events import Event

_STAGES = {
    "before_model": "input",
    "after_model": "output",
    "before_tool": "tool_call",
    "after_tool": "tool_result",
    "on_model_error": "input",
}


class Chain:
    """A loop's middleware, checked once when the loop is built, each hook's list sorted
    by who overrides it (a chain that never touches tools costs tool calls nothing)."""

    __slots__ = ("after_model", "after_tool", "before_model", "before_tool", "items", "on_error")

    def __init__(self, middleware: Iterable[Middleware]):
        items = list(middleware)
        for m in items:
            if not isinstance(m, Middleware):
                raise ConfigurationError(
                    f"middleware must be agentloops.Middleware instances, got {m!r}"
                )
        self.items = items
        self.before_model = [m for m in items if overrides(m, "before_model")]
        self.after_model = [m for m in reversed(items) if overrides(m, "after_model")]
        self.on_error = [m for m in reversed(items) if overrides(m, "on_model_error")]
        self.before_tool = [(i, m) for i, m in enumerate(items) if overrides(m, "before_tool")]
        after = [(i, m) for i, m in enumerate(items) if overrides(m, "after_tool")]
        self.after_tool = after[::-1]

    def __bool__(self) -> bool:
        return bool(self.items)

    def fingerprint(self) -> list[list[Any]] | None:
        """The chain's part of a run's fingerprint: each middleware's name and settings, in
        order (`None`: no middleware)."""
        if not self.items:
            return None
        return [list(fingerprint_of(m)) for m in self.items]


NO_MIDDLEWARE = Chain(())


def chained(
    machine: Machine[R],
    chain: Chain,
    *,
    loop: str,
    run_id: str,
    task: str | Sequence[Message],
    totals: Totals | None,
    parent_run_id: str | None,
    observed: bool,
) -> Machine[R]:
    """`machine` with `chain` around its model and tool calls (see the module doc): itself
    when the chain is empty. `totals`: the run's, which a hook's own model calls add to
    (`None`: the machine counts nothing of the kind, a router's). Closing the result
    closes `machine`."""
    if not chain:
        return machine
    wrap = _Wrap(chain, loop, run_id, task, totals, parent_run_id, observed)
    return _closing(machine, wrap)


def _closing(machine: Machine[R], wrap: _Wrap) -> Machine[R]:
    try:
        return (yield from wrap.drive(machine))
    finally:
        machine.close()


class _Wrap:
    """One run's chain: its hooks' state, the calls started, the outcomes answered here."""

    def __init__(
        self,
        chain: Chain,
        loop: str,
        run_id: str,
        task: str | Sequence[Message],
        totals: Totals | None,
        parent_run_id: str | None,
        observed: bool,
    ):
        self.chain = chain
        self.loop, self.run_id, self.task = loop, run_id, task
        self.totals, self.parent_run_id, self.observed = totals, parent_run_id, observed
        self.states: dict[int, dict[str, Any]] = {id(m): {} for m in chain.items}
        self.events: list[Event] = []
        self.role, self.step = "", 0
        self.started: dict[str, tuple[ToolCall, int, str]] = {}
        """Call id -> (the call as run, how deep in the chain it went, its run id)."""
        self.answered: deque[tuple[str, ToolOutcome]] = deque()
        """Calls answered by a `before_tool`, waiting for the machine's `NextTool`."""
        self.stop: Stop | None = None
        self.trip: GuardrailTripped | None = None
        self.hook: object = None
        self.stage = "input"
        """The hook running now (a `GuardrailTripped` it raises names it)."""

    def drive(self, machine: Machine[R]) -> Machine[R]:
        outcome: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = machine.send(outcome) if error is None else machine.throw(error)
            except StopIteration as done:
                result: R = done.value
                return result
            except Stop as stopped:
                if stopped is not self.stop:  # another wrapper's (the meter's)
                    raise
                if stopped.result is None and self.trip is not None:
                    raise self.trip from None  # no lifecycle made a result (a router's)
                partial: R = stopped.result
                return partial
            outcome, error = None, None
            kind = type(effect)
            try:
                if kind is CallModel:
                    outcome = yield from self.model(effect)  # type: ignore[arg-type]
                elif kind is StartTool:
                    yield from self.start(effect)  # type: ignore[arg-type]
                elif kind is NextTool:
                    outcome = yield from self.next(effect)  # type: ignore[arg-type]
                else:
                    outcome = yield effect
            except GuardrailTripped as tripped:
                error = self.tripped(tripped)
            except Exception as exc:  # the machine decides, as under any driver
                error = exc
            if self.events:
                try:
                    yield from self.flush()
                except Exception as exc:
                    error = error or exc

    # -- model calls ---------------------------------------------------------------------

    def model(self, effect: CallModel) -> Machine[ModelResponse]:
        chain = self.chain
        request = effect.request
        self.role, self.step = request.role, effect.step
        for m in chain.before_model:
            ctx = self.context(m, "before_model", effect, effect.run_id)
            request = yield from self.value(m.before_model(request, ctx))
        if request is not effect.request:
            effect = dataclasses.replace(effect, request=request)
        try:
            response: ModelResponse = yield effect
        except ModelError as error:
            retry = None
            for m in chain.on_error:
                ctx = self.context(m, "on_model_error", effect, effect.run_id)
                retry = yield from self.value(m.on_model_error(request, error, ctx))
                if retry is not None:
                    break
            if retry is None:
                raise
            request = retry
            response = yield dataclasses.replace(effect, request=retry)  # once more, at most
        for m in chain.after_model:
            ctx = self.context(m, "after_model", effect, effect.run_id)
            response = yield from self.value(m.after_model(request, response, ctx))
        return response

    def value(self, returned: Any) -> Machine[Any]:
        """A hook's value: what it returned, or, for a generator, what it returns once the
        effects it yields are performed (its model calls counted in the run's totals)."""
        if not inspect.isgenerator(returned):
            return returned
        outcome: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = returned.send(outcome) if error is None else returned.throw(error)
            except StopIteration as done:
                return done.value
            outcome, error = None, None
            try:
                outcome = yield effect  # type: ignore[misc]
            except Exception as exc:  # the hook decides; if it does not, the machine does
                error = exc
                continue
            if type(effect) is CallModel and self.totals is not None:
                self.totals.spend(outcome.usage)

    # -- tool calls ----------------------------------------------------------------------

    def start(self, effect: StartTool) -> Machine[None]:
        call = effect.call
        run_id = effect.run_id
        depth = len(self.chain.items)
        for i, m in self.chain.before_tool:
            ctx = self.context(m, "before_tool", None, run_id)
            changed = yield from self.value(m.before_tool(call, ctx))
            if isinstance(changed, ToolOutcome):  # answered here: the call is not run
                self.answered.append((call.id, changed))
                self.started[call.id] = (call, i + 1, run_id)
                return None
            if changed.id != call.id:
                raise ConfigurationError(
                    f"{name_of(m)}.before_tool changed call id {call.id!r} to {changed.id!r}"
                )
            call = changed
        if call is not effect.call:
            effect = dataclasses.replace(effect, call=call)
        self.started[call.id] = (call, depth, run_id)
        yield effect
        return None

    def next(self, effect: NextTool) -> Machine[tuple[str, ToolOutcome]]:
        if self.answered:
            call_id, outcome = self.answered.popleft()
        else:
            call_id, outcome = yield effect
        started = self.started.pop(call_id, None)
        if started is None:
            return call_id, outcome
        call, depth, run_id = started
        for i, m in self.chain.after_tool:
            if i < depth:
                ctx = self.context(m, "after_tool", None, run_id)
                outcome = yield from self.value(m.after_tool(call, outcome, ctx))
        return call_id, outcome

    # -- what hooks see and do -----------------------------------------------------------

    def context(
        self, m: Middleware, hook: str, effect: CallModel | None, run_id: str
    ) -> MiddlewareContext:
        """What hook `hook` of `m` is told (and who raised a trip, should it raise one)."""
        self.hook, self.stage = m, _STAGES[hook]
        parent = self.parent_run_id
        if effect is not None and effect.parent_run_id is not None:
            parent = effect.parent_run_id
        return MiddlewareContext(
            run_id=run_id,
            loop=self.loop,
            role=self.role,
            step=self.step,
            parent_run_id=parent,
            task=self.task,
            client=None if effect is None else effect.client,
            state=self.states[id(m)],
            observed=self.observed,
            events=self.events,
        )

    def tripped(self, tripped: GuardrailTripped) -> Stop:
        """A trip (a guard's, or any hook's `GuardrailTripped`): the run's stop, and its
        event."""
        guard = tripped.guard or name_of(self.hook)
        stage = tripped.stage or self.stage
        if self.observed:
            self.events.append(
                GuardTripped(
                    loop=self.loop,
                    run_id=self.run_id,
                    parent_run_id=self.parent_run_id,
                    guard=guard,
                    stage=stage,
                    reason=tripped.reason,
                )
            )
        self.stop = Stop("guardrail", f"{guard} tripped ({stage}): {tripped.reason}")
        self.trip = GuardrailTripped(tripped.reason, guard=guard, stage=stage)
        return self.stop

    def flush(self) -> Machine[None]:
        events = self.events[:]
        self.events.clear()  # in place: the contexts hold this list
        for event in events:
            yield Emit(event)
