"""The asyncio driver: performs a step machine's effects on the event loop.

Model calls await the client's `acomplete` (or `astream` when someone streams); a
client with only `complete` runs on agentloops' bounded pool (`agentloops._pool`), with a
deadline. Tool calls await the registry's `acall`: an `async def` tool runs on the loop,
a sync one on the pool; journal writes run on agentloops' own pool for store I/O. Nothing
here asks the event loop's default executor for a thread. Cancelling the task that drives
a run cancels the model call and the tool calls in flight, closes the machine, and lets
`CancelledError` propagate; a `CancelledError` that is not the run's (a tool awaited
something someone else cancelled) is that call's failure.

A call of an agent tool (or a handoff) is a sub-run this driver drives itself, as a
nested `drive` of its machine: awaited inline when it is the turn's lone call, else in a
task whose events (deltas included) come back through the driver's inbox. Cancelling the
run cancels its sub-runs' tasks.

Rule: a driver performs effects and decides nothing; it knows no loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic

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
from agentloops.errors import AgentLoopsError, ModelError
from agentloops.events import Event, EventSink
from agentloops.messages import ToolOutcome
from agentloops.model import ModelResponse
from agentloops.providers import _calls as calls
from agentloops.tools._runtime import own_cancel


@dataclass(frozen=True, slots=True)
class Done(Generic[R]):
    """The last item `drive` yields: the machine's result."""

    value: R


async def run(machine: Machine[R], host: ToolHost, on_event: EventSink | None = None) -> R:
    """Drive `machine` to its result, handing every event to `on_event` (a sink that
    raises fails the run with its partial result, as under the sync driver)."""
    halt = _events.Halt()
    observed = on_event is not None
    items = drive(machine, host, observed=observed, halt=halt if observed else None)
    async with contextlib.aclosing(items):
        while True:
            item = await items.__anext__()
            if isinstance(item, Done):
                return item.value
            if halt.error is None:
                try:
                    on_event(item)  # type: ignore[misc]  # no sink: the machine emits nothing
                except Exception as exc:
                    halt.error = exc


async def drive(
    machine: Machine[R],
    host: ToolHost,
    *,
    observed: bool,
    streaming: bool = False,
    halt: _events.Halt | None = None,
) -> AsyncGenerator[Event | Done[R], None]:
    """Perform `machine`'s effects until it returns: yields events (when `observed`),
    then `Done(result)`. With `streaming`, model deltas are yielded as they arrive.
    `halt` holds a failed sink's error, raised into the machine at the next new work (a
    sub-run's drive shares its caller's: its machine stops there too)."""
    tools = _Tools(host, observed, streaming, halt)
    try:
        try:
            effect = next(machine)
        except StopIteration as done:
            yield Done(done.value)
            return
        while True:
            kind = type(effect)
            outcome: Any = None
            try:
                if halt is not None and halt.error is not None and kind in _events.HALTS_AT:
                    raise halt.error
                if kind is CallModel:
                    async for part in _call_model(effect, observed, streaming, halt):  # type: ignore[arg-type]
                        if type(part) is ModelResponse:
                            outcome = part
                        else:
                            yield part  # type: ignore[misc]
                elif kind is StartTool:
                    tools.start(effect)  # type: ignore[arg-type]
                elif kind is NextTool:
                    async for item in tools.next():
                        if type(item) is tuple:
                            outcome = item
                        else:
                            yield item  # type: ignore[misc]
                elif kind is Emit:
                    yield effect.event  # type: ignore[union-attr]
                elif kind is Journal:
                    await _journal(effect)  # type: ignore[arg-type]
                elif kind is CheckOutput:
                    outcome = await _events.acheck(effect)  # type: ignore[arg-type]
                elif kind is CheckGuard:
                    if effect.call is None:  # type: ignore[union-attr]
                        outcome = await _events.aguard(effect)  # type: ignore[arg-type]
                    else:
                        async for part in _guarded(effect, observed, streaming, halt):  # type: ignore[arg-type]
                            if type(part) is ModelResponse:
                                outcome = part
                            else:
                                yield part  # type: ignore[misc]
                elif kind is not Decide:  # Decide: nobody to ask in a plain run
                    raise TypeError(f"not an effect: {effect!r}")
            except Exception as exc:  # the machine decides: attach its partial result, raise
                try:
                    effect = machine.throw(exc)
                except StopIteration as done:
                    yield Done(done.value)
                    return
                continue
            try:
                effect = machine.send(outcome)
            except StopIteration as done:
                yield Done(done.value)
                return
    finally:
        tools.cancel()
        machine.close()


async def _journal(effect: Journal) -> None:
    """A journal write: the session's async path (`Session.awrite`: no thread hop for a
    store that needs none), else on agentloops' own pool for store I/O."""
    awrite = getattr(effect.write, "awrite", None)
    if awrite is not None:
        await awrite(effect.entries, effect.status)
    else:
        await _pool.call(effect.write, effect.entries, effect.status, pool=_pool.own)


async def _call_model(
    effect: CallModel, observed: bool, streaming: bool, halt: _events.Halt | None
) -> AsyncIterator[Event | ModelResponse]:
    client, request = effect.client, effect.request
    if observed:
        yield _events.model_started(effect)
        if halt is not None:
            halt.check()  # its event could not be written: the call is not made
    start = time.perf_counter()
    astream = getattr(client, "astream", None) if streaming else None
    response: ModelResponse | None = None
    if astream is not None:
        parts = astream(request)
        partial = PartialOutput(effect.output) if effect.output is not None else None
        try:
            async for part in parts:
                if isinstance(part, ModelResponse):
                    response = part
                    break
                yield _events.delta(part, effect)
                parsed = partial.feed(part) if partial is not None else None
                if parsed is not None:
                    yield _events.delta(parsed, effect)
        finally:
            aclose = getattr(parts, "aclose", None)  # an async generator's
            if aclose is not None:
                await aclose()
        if response is None:
            name = type(client).__name__
            raise ModelError(f"{name}.astream ended without a final response")
    else:  # a sync-only client must not block the loop: on the pool, with a deadline
        response = await calls.acomplete(client, request)
    assert response is not None
    if observed:
        yield _events.model_finished(effect, response, time.perf_counter() - start)
    yield response


_END = object()


async def _guarded(
    effect: CheckGuard, observed: bool, streaming: bool, halt: _events.Halt | None
) -> AsyncIterator[Event | ModelResponse]:
    """A guard's check and its model call at the same time: the call is cancelled when the
    check trips (or fails); its events and deltas wait for the check's verdict."""
    call = effect.call
    assert call is not None
    parts: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for part in _call_model(call, observed, streaming, halt):
                parts.put_nowait(part)
        except Exception as exc:  # handed on after the verdict: a trip beats a failure
            parts.put_nowait(exc)
        parts.put_nowait(_END)

    loop = asyncio.get_running_loop()
    check = loop.create_task(_events.aguard(effect))
    calling = loop.create_task(pump())
    try:
        reason = await check
        if reason is not None:
            raise _events.tripped(effect, reason)
        while (part := await parts.get()) is not _END:
            if isinstance(part, Exception):
                raise part
            yield part
    finally:
        for task in (check, calling):
            if not task.done():
                task.cancel()
        await asyncio.gather(check, calling, return_exceptions=True)


class _Tools:
    """Started calls as tasks; a lone call is awaited inline, without a task."""

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
        self.queued: list[StartTool] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.cancelled = False
        """The driver cancelled the calls in flight (a call task cancelled otherwise failed)."""
        # (Event,) from tool tasks, or (call_id, ToolOutcome | BaseException, its
        # ToolCallFinished or None: one item, so a sink failing at the event never parts
        # them); made when a turn first runs calls in parallel (lone calls need none)
        self._inbox: asyncio.Queue[tuple[Any, ...]] | None = None

    @property
    def inbox(self) -> asyncio.Queue[tuple[Any, ...]]:
        if self._inbox is None:
            self._inbox = asyncio.Queue()
        return self._inbox

    def start(self, effect: StartTool) -> None:
        self.queued.append(effect)

    async def next(self) -> AsyncIterator[Event | tuple[str, ToolOutcome]]:
        hosted = self.host.registry.hosted
        halt = self.halt
        if self.queued and halt is not None and halt.error is not None:
            self.queued.clear()  # a failed sink: no new call starts
        if self.queued:
            lone = not self.tasks and len(self.queued) == 1
            if lone and (self.host.executor is None or self.queued[0].call.name in hosted):
                effect = self.queued.pop()
                if self.observed:
                    yield _events.tool_started(effect)
                    if halt is not None:
                        halt.check()  # its event could not be written: the call is not made
                if effect.call.name in hosted:
                    outcome = ToolOutcome(content="")
                    async for part in self.hosted(effect):
                        if type(part) is ToolOutcome:
                            outcome = part
                        else:
                            yield part  # type: ignore[misc]  # an event of the sub-run
                else:
                    outcome = await self._call(effect)
                if self.observed:
                    yield _events.tool_finished(effect, outcome)
                yield effect.call.id, outcome
                return
            queued = self.queued[:]
            self.queued.clear()
            for effect in queued:
                task = asyncio.get_running_loop().create_task(self._run(effect))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        while True:
            if halt is None or halt.error is None:
                item = await self.inbox.get()
            else:  # a failed sink: the outcomes already in, then its error
                try:
                    item = self.inbox.get_nowait()
                except asyncio.QueueEmpty:
                    raise halt.error from None
            if len(item) == 1:
                yield item[0]
                continue
            call_id, outcome, finished = item
            if isinstance(outcome, BaseException):
                raise outcome  # KeyboardInterrupt or SystemExit from a tool ends the run
            if finished is not None:
                yield finished
            yield call_id, outcome
            return

    async def _run(self, effect: StartTool) -> None:
        inbox, finished = self.inbox, None
        try:
            if self.observed:
                inbox.put_nowait((_events.tool_started(effect),))
            outcome: ToolOutcome | BaseException
            try:
                if effect.call.name in self.host.registry.hosted:
                    outcome = await self._hosted_to(inbox, effect)
                else:
                    outcome = await self._call(effect)
            except asyncio.CancelledError as exc:
                if self.cancelled:  # the run's own cancellation: nobody waits for this call
                    raise
                outcome = _events.cancelled(exc)  # not by us: the call failed, and says so
            if self.observed:
                finished = _events.tool_finished(effect, outcome)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the driver, which raises it
            outcome = exc
        inbox.put_nowait((effect.call.id, outcome, finished))

    async def _hosted_to(
        self, inbox: asyncio.Queue[tuple[Any, ...]], effect: StartTool
    ) -> ToolOutcome:
        """A sub-run in a task: its events go to the driver's inbox as they come."""
        outcome = ToolOutcome(content="")
        async for part in self.hosted(effect):
            if type(part) is ToolOutcome:
                outcome = part
            else:
                inbox.put_nowait((part,))
        return outcome

    async def hosted(self, effect: StartTool) -> AsyncIterator[Event | ToolOutcome]:
        """Drive the sub-run of an agent tool's call on this loop, as a nested drive: its
        events, then the call's outcome."""
        job = Job(effect, self.host, self.observed)
        refused = job.refusal()
        if refused is not None:
            yield refused
            return
        result: Any = None
        try:
            machine, host = await _pool.call(job.open, pool=_pool.own)
            items = drive(
                machine, host, observed=self.observed, streaming=self.streaming, halt=self.halt
            )
            async with contextlib.aclosing(items):
                async for item in items:
                    if type(item) is Done:
                        result = item.value
                    else:
                        yield item  # type: ignore[misc]
        except AgentLoopsError as exc:
            yield job.failed(exc)
            return
        finally:
            await _pool.call(job.close, pool=_pool.own)
        yield job.outcome(result)

    async def _call(self, effect: StartTool) -> ToolOutcome:
        call, host = effect.call, self.host
        if host.executor is None:
            return await host.acall(effect)
        caller = host.caller(call.name)
        keys: dict[str, Any] = {"key": effect.call_key}
        if effect.cache is not None:  # a middleware's cache goes along
            keys["cache"] = effect.cache
        future = host.executor.submit(caller, call.name, call.args, **keys)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError as exc:
            if not own_cancel(exc):  # the run is cancelled
                raise
            return _events.lost(exc)  # the executor cancelled the call (it shut down)
        except Exception as exc:  # the executor lost the call: its failure
            return _events.lost(exc)

    def cancel(self) -> None:
        """Cancel every call in flight (a sync tool's thread runs on, abandoned)."""
        self.cancelled = True
        for task in list(self.tasks):
            task.cancel()
        self.queued.clear()
