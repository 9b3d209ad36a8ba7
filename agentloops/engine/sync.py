"""The synchronous driver: performs a step machine's effects on this thread, and runs
parallel tool calls on daemon threads (or on an executor the loop was given).

`drive` is a generator of the run's events that returns the run's result: `run` hands
the events to a sink, `stream` (in `agentloops.engine.streams`) yields them. Events from
tool threads come back to this thread before they are handed on, so a sink never needs
to be thread-safe.

A call of an agent tool (or a handoff) is a sub-run this driver drives itself, as a
nested `drive` of its machine: inline when it is the turn's lone call, else on a daemon
thread whose events (deltas included) come back to this thread like a tool thread's. A
run that stops early (its stream closed) stops its sub-runs on their threads too, before
their next model or tool call.

Rule: a driver performs effects and decides nothing; it knows no loop.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from agentloops import _pool
from agentloops.engine import _events
from agentloops.engine._hosting import Job
from agentloops.engine._partial import PartialOutput
from agentloops.engine.effects import (
    CallModel,
    CheckGuard,
    CheckOutput,
    Decide,
    Emit,
    Journal,
    Machine,
    NextTool,
    R,
    StartTool,
)
from agentloops.engine.host import ToolHost
from agentloops.errors import AgentLoopsError
from agentloops.events import Event, EventSink
from agentloops.messages import ToolOutcome
from agentloops.model import ModelResponse

Events = Generator[Event, None, R]


def run(machine: Machine[R], host: ToolHost, on_event: EventSink | None = None) -> R:
    """Drive `machine` to its result, handing every event to `on_event`.

    A sink that raises (a full disk under a `JSONLSink`) fails the run: later events are
    not sent to it, and its error goes into the machine (which attaches the partial result)
    at the next new work, so the model reply or tool outcome under way is kept
    (`_events.Halt`).
    """
    halt = _events.Halt()
    observed = on_event is not None
    events = drive(machine, host, observed=observed, halt=halt if observed else None)
    try:
        while True:
            try:
                event = next(events)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if halt.error is None:
                try:
                    on_event(event)  # type: ignore[misc]  # no sink: the machine emits nothing
                except Exception as exc:
                    halt.error = exc
    finally:
        events.close()


class _Abandoned(BaseException):
    """Ends a sub-run on a thread whose caller stopped (its stream was closed)."""


def drive(
    machine: Machine[R],
    host: ToolHost,
    *,
    observed: bool,
    streaming: bool = False,
    stop: threading.Event | None = None,
    halt: _events.Halt | None = None,
) -> Events[R]:
    """Perform `machine`'s effects until it returns; yields events when `observed`.

    With `streaming`, model calls go through the client's `stream` (when it has one)
    and its deltas are yielded as they arrive. A set `stop` (a sub-run on a thread, whose
    caller stopped) ends the drive before its next effect. `halt` holds a failed sink's
    error, raised into the machine at the next new work (a sub-run's drive shares its
    caller's: its machine stops there too, with its partial result).
    """
    tools = _Tools(host, observed, streaming, halt)
    queued = tools.queued
    quiet = not observed and not streaming
    inline = host.executor is None and not host.registry.hosted
    try:
        effect = next(machine)
        while True:
            if stop is not None and stop.is_set():
                raise _Abandoned
            kind = type(effect)
            try:
                if halt is not None and halt.error is not None and kind in _events.HALTS_AT:
                    raise halt.error
                if kind is CallModel:
                    if quiet:  # the common case, without a generator in between
                        outcome: Any = effect.client.complete(effect.request)  # type: ignore[union-attr]
                    else:
                        outcome = yield from _call_model(effect, observed, streaming, halt)  # type: ignore[arg-type]
                elif kind is StartTool:
                    queued.append(effect)  # type: ignore[arg-type]
                    outcome = None
                elif kind is NextTool:
                    if not observed and inline and len(queued) == 1 and not tools.running:
                        lone = queued.pop()  # a lone call runs inline, on this thread
                        outcome = lone.call.id, host.call(lone)
                    else:
                        outcome = yield from tools.next()
                elif kind is Emit:
                    yield effect.event  # type: ignore[union-attr]
                    outcome = None
                elif kind is Decide:
                    outcome = None  # nobody to ask in a plain run: the machine pauses
                elif kind is Journal:
                    effect.write(effect.entries, effect.status)  # type: ignore[union-attr]
                    outcome = None
                elif kind is CheckOutput:
                    outcome = _events.check(effect)  # type: ignore[arg-type]
                elif kind is CheckGuard:  # with a call: the check first, here
                    outcome = yield from _guarded(effect, quiet, observed, streaming, halt)  # type: ignore[arg-type]
                else:
                    raise TypeError(f"not an effect: {effect!r}")
            except Exception as exc:  # the machine decides: attach its partial result, raise
                effect = machine.throw(exc)
                continue
            effect = machine.send(outcome)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        if tools.stop is not None:
            tools.stop.set()
        machine.close()


def _guarded(
    effect: CheckGuard, quiet: bool, observed: bool, streaming: bool, halt: _events.Halt | None
) -> Events[Any]:
    """A guard's check; with its call, the call once the check passed."""
    reason = _events.guard(effect)
    call = effect.call
    if call is None:
        return reason
    if reason is not None:
        raise _events.tripped(effect, reason)
    if quiet:
        return call.client.complete(call.request)
    return (yield from _call_model(call, observed, streaming, halt))


def _call_model(
    effect: CallModel, observed: bool, streaming: bool, halt: _events.Halt | None
) -> Events[ModelResponse]:
    client, request = effect.client, effect.request
    start = time.perf_counter()
    if observed:
        yield _events.model_started(effect)
        if halt is not None:
            halt.check()  # its event could not be written: the call is not made
    stream = getattr(client, "stream", None) if streaming else None
    if stream is None:
        response = client.complete(request)
    else:
        response = yield from _streamed(stream(request), effect)
    if observed:
        yield _events.model_finished(effect, response, time.perf_counter() - start)
    return response


def _streamed(parts: Any, effect: CallModel) -> Events[ModelResponse]:
    """Yield a streaming client's deltas (stamped with the run), and the typed answer parsed
    so far when the call may write one; return the response."""
    from agentloops.errors import ModelError

    partial = PartialOutput(effect.output) if effect.output is not None else None
    try:
        for part in parts:
            if isinstance(part, ModelResponse):
                return part
            yield _events.delta(part, effect)
            if partial is not None:
                parsed = partial.feed(part)
                if parsed is not None:
                    yield _events.delta(parsed, effect)
    finally:
        close = getattr(parts, "close", None)  # a generator's; a plain iterator has none
        if close is not None:
            close()
    raise ModelError(f"{type(effect.client).__name__}.stream ended without a final response")


class _Tools:
    """Started calls: queued until someone waits, so a lone call runs inline (no thread)."""

    def __init__(
        self,
        host: ToolHost,
        observed: bool,
        streaming: bool = False,
        halt: _events.Halt | None = None,
    ):
        self.host = host
        self.observed = observed
        self.streaming = streaming
        self.halt = halt
        self.stop: threading.Event | None = None
        """Set when the drive ends: sub-runs still on their threads stop (made with the
        first sub-run on a thread)."""
        self.queued: list[StartTool] = []
        self.running = 0
        # ("event", Event) from tool threads, or ("done", call_id, ToolOutcome |
        # BaseException, its ToolCallFinished or None): a call's outcome and its event
        # arrive together, so a sink failing at the event never parts them
        self.inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.callers: dict[str, Callable[..., ToolOutcome]] = {}

    def next(self) -> Events[tuple[str, ToolOutcome]]:
        halt = self.halt
        if self.queued:
            if halt is not None and halt.error is not None:
                self.queued.clear()  # a failed sink: no new call starts
            elif self.running == 0 and len(self.queued) == 1 and self._inline_ok(self.queued[0]):
                return (yield from self._inline(self.queued.pop()))
            else:
                self._submit_queued()
        while True:
            if halt is None or halt.error is None:
                item = self.inbox.get()
            else:  # a failed sink: the outcomes already in, then its error
                try:
                    item = self.inbox.get_nowait()
                except queue.Empty:
                    raise halt.error from None
            if item[0] == "event":
                yield item[1]
                continue
            self.running -= 1
            _, call_id, outcome, finished = item
            if isinstance(outcome, BaseException):
                raise outcome  # KeyboardInterrupt or SystemExit from a tool ends the run
            if finished is not None:
                yield finished
            return call_id, outcome

    def _inline_ok(self, effect: StartTool) -> bool:
        """A lone call runs here unless the loop's executor takes it (a sub-run never
        goes to an executor: this driver drives it)."""
        return self.host.executor is None or effect.call.name in self.host.registry.hosted

    def _inline(self, effect: StartTool) -> Events[tuple[str, ToolOutcome]]:
        call = effect.call
        if self.observed:
            yield _events.tool_started(effect)
            if self.halt is not None:
                self.halt.check()  # its event could not be written: the call is not made
        if call.name in self.host.registry.hosted:
            outcome = yield from self.hosted(effect)
        else:
            outcome = self.host.call(effect)
        if self.observed:
            yield _events.tool_finished(effect, outcome)
        return call.id, outcome

    def hosted(self, effect: StartTool, stop: threading.Event | None = None) -> Events[ToolOutcome]:
        """Drive the sub-run of an agent tool's call here, as a nested drive."""
        job = Job(effect, self.host, self.observed)
        refused = job.refusal()
        if refused is not None:
            return refused
        try:
            machine, host = job.open()
            result = yield from drive(
                machine,
                host,
                observed=self.observed,
                streaming=self.streaming,
                stop=stop,
                halt=self.halt,
            )
        except AgentLoopsError as exc:
            return job.failed(exc)
        finally:
            job.close()
        return job.outcome(result)

    def _submit_queued(self) -> None:
        queued = self.queued[:]
        self.queued.clear()  # in place: the driver holds this list
        executor, hosted = self.host.executor, self.host.registry.hosted
        # Every caller is ready (a remote executor's are checked for pickling) before
        # anything is submitted.
        callers = {
            e.call.name: self._caller(e.call.name)
            for e in queued
            if executor is not None and e.call.name not in hosted
        }
        for effect in queued:
            self.running += 1
            if effect.call.name in hosted:
                if self.stop is None:
                    self.stop = threading.Event()
                _pool.start(_hosted_task(self, effect))
            elif executor is None:
                _pool.start(_task(self, effect))
            else:
                self._submit_to(executor, callers[effect.call.name], effect)

    def _submit_to(
        self, executor: Executor, caller: Callable[..., ToolOutcome], e: StartTool
    ) -> None:
        call, inbox = e.call, self.inbox
        if self.observed:
            inbox.put(("event", _events.tool_started(e)))
        try:
            # the key travels with the call (and a middleware's cache, when one was given)
            keys: dict[str, Any] = {"key": e.call_key}
            if e.cache is not None:
                keys["cache"] = e.cache
            if isinstance(executor, ThreadPoolExecutor):  # the caller's contextvars go along
                ctx = contextvars.copy_context()
                future: Future[ToolOutcome] = executor.submit(
                    ctx.run,  # type: ignore[arg-type]
                    caller,
                    call.name,
                    call.args,
                    **keys,
                )
            else:  # to a remote worker
                future = executor.submit(caller, call.name, call.args, **keys)
        except Exception as exc:  # e.g. an executor that is shut down
            future = Future()
            future.set_exception(exc)

        def collect(f: Future[ToolOutcome]) -> None:
            try:
                outcome: ToolOutcome | BaseException = f.result()
            except BaseException as exc:  # the executor lost the call: its failure
                outcome = _events.lost(exc) if isinstance(exc, Exception) else exc
            finished = None
            if self.observed and isinstance(outcome, ToolOutcome):
                finished = _events.tool_finished(e, outcome)
            inbox.put(("done", call.id, outcome, finished))

        future.add_done_callback(collect)

    def _caller(self, name: str) -> Callable[..., ToolOutcome]:
        caller = self.callers.get(name)
        if caller is None:
            caller = self.callers[name] = self.host.caller(name)
        return caller


def _hosted_task(tools: _Tools, effect: StartTool) -> Callable[[], None]:
    """A sub-run on a daemon thread: its events go to the driver's inbox as they come."""
    call, inbox, observed = effect.call, tools.inbox, tools.observed
    ctx = contextvars.copy_context()

    def task() -> None:
        finished = None
        try:
            if observed:
                inbox.put(("event", _events.tool_started(effect)))
            outcome: ToolOutcome | BaseException = ctx.run(
                _drain, tools.hosted(effect, tools.stop), inbox
            )
            if observed:
                finished = _events.tool_finished(effect, outcome)  # type: ignore[arg-type]
        except BaseException as exc:  # handed to the driver's thread, which raises it
            outcome = exc
        inbox.put(("done", call.id, outcome, finished))

    return task


def _drain(events: Events[ToolOutcome], inbox: queue.SimpleQueue[tuple[Any, ...]]) -> ToolOutcome:
    """Run a sub-run's drive to its outcome, posting its events to the driver."""
    while True:
        try:
            event = next(events)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        inbox.put(("event", event))


def _task(tools: _Tools, effect: StartTool) -> Callable[[], None]:
    call, inbox, observed = effect.call, tools.inbox, tools.observed
    ctx = contextvars.copy_context()

    def task() -> None:
        finished = None
        try:
            if observed:
                inbox.put(("event", _events.tool_started(effect)))
            outcome: ToolOutcome | BaseException = ctx.run(tools.host.call, effect)
            if observed:
                finished = _events.tool_finished(effect, outcome)  # type: ignore[arg-type]
        except BaseException as exc:  # handed to the driver's thread, which raises it
            outcome = exc
        inbox.put(("done", call.id, outcome, finished))

    return task
