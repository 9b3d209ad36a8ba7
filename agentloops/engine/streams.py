"""`stream` and `astream`: a run's events as an iterator, ending with its result.

Order guarantees: `RunStarted` first; each model call's deltas arrive between its
`ModelCallStarted` and `ModelCallFinished`; a tool call's `ToolCallStarted` comes before
its `ToolCallFinished`, and calls of one turn may interleave; `RunFinished` is the last
event, then the result. Stopping early (closing the iterator, or leaving an
`async with aclosing(...)` block) ends the run: no further model or tool call starts, and
a call in flight is abandoned (an async one is cancelled).

Rule: a driver's iterator face; it decides nothing and knows no loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from agentloops.engine import sync
from agentloops.engine.effects import Machine, R
from agentloops.engine.host import ToolHost
from agentloops.events import Event, EventSink


def stream(
    machine: Machine[R], host: ToolHost, on_event: EventSink | None = None
) -> Iterator[Event | R]:
    """The run's events as they happen (each also handed to `on_event`), then its result."""
    events = sync.drive(machine, host, observed=True, streaming=True)
    with contextlib.closing(events):
        while True:
            try:
                event = next(events)
            except StopIteration as done:
                yield done.value
                return
            if on_event is not None:
                on_event(event)
            yield event


async def astream(
    machine: Machine[R], host: ToolHost, on_event: EventSink | None = None
) -> AsyncIterator[Event | R]:
    """`stream` on the event loop."""
    from agentloops.engine import aio

    items = aio.drive(machine, host, observed=True, streaming=True)
    async with contextlib.aclosing(items):
        async for item in items:
            if type(item) is aio.Done:
                yield item.value
                return
            if on_event is not None:
                on_event(item)  # type: ignore[arg-type]
            yield item  # type: ignore[misc]
