"""Runs this server drives on its event loop, each with the feed a page follows.

A run is `Analyst.aproceed` in an asyncio task: the loops' asyncio drivers hand every
event to the run's sink, which turns it into a feed item, and the run's model clients
are watched (`LiveRun.watch`): each call's start and, as the model streams it, its text.
Text is sent in pieces gathered over `TEXT_EVERY` seconds, not one item per token. The
feed is kept whole while the server lives, so a page that opens (or reconnects to) a run
sees it from the start; any number of pages can follow one run. Every item is added
through the event loop's `call_soon_threadsafe` (first in, first out), whichever thread
made it, so the feed keeps the order the events and stages happened in (text gathered
so far goes out before any other item), and the `end` item comes last.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentloops import Event, ModelClient
from market_analyst.store import RUNNING
from market_analyst.watch import CallStarted, CallText, Note, Watched
from market_analyst.web.feed import Feed, Item
from market_analyst.workflow import Analyst

Renderer = Callable[[str], str]

TEXT_EVERY = 0.1
"""Seconds streamed text is gathered before it is sent."""


class LiveRun:
    """One run in this server: its feed so far, and its task."""

    def __init__(self, run_id: str, render: Renderer):
        self.run_id = run_id
        self.items: list[Item] = []
        self.done = False
        self.task: asyncio.Task[None] | None = None
        self._feed = Feed()
        self._render = render
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._flush_later: asyncio.TimerHandle | None = None

    # -- sinks (any thread) -------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """The loops' event sink."""
        self._loop.call_soon_threadsafe(self._add_event, event)

    def on_stage(self, stage: str, record: dict[str, Any]) -> None:
        """The analyst's `notify`: a stage finished."""
        extra = {"draft_html": self._render(record["draft"])} if stage == "draft" else {}
        self._post(self._feed.stage(stage, record, **extra))

    def watch(self, model: ModelClient) -> ModelClient:
        """`model`, streamed when it can be, with each call's start and text in the feed."""
        return Watched(model, self._on_call, stream=True)

    def _on_call(self, note: Note) -> None:
        self._loop.call_soon_threadsafe(self._add_call, note)

    def _post(self, item: Item) -> None:
        self._loop.call_soon_threadsafe(self._add, item)

    def _add_event(self, event: Event) -> None:
        item = self._feed.event(event)
        if item is not None:
            self._add(item)

    def _add_call(self, note: Note) -> None:
        if isinstance(note, CallStarted):
            self._add(self._feed.thinking(note.role))
        elif isinstance(note, CallText):
            gathered = self._feed.text(note)
            if gathered is not None:
                self._append(gathered)
            if self._flush_later is None:
                self._flush_later = self._loop.call_later(TEXT_EVERY, self._flush)
        else:  # finished: what it wrote goes out now, before its `model` item
            self._flush()

    def _flush(self) -> None:
        if self._flush_later is not None:
            self._flush_later.cancel()
            self._flush_later = None
        gathered = self._feed.flush()
        if gathered is not None:
            self._append(gathered)

    def _add(self, item: Item) -> None:
        self._flush()
        self._append(item)

    def _append(self, item: Item) -> None:
        self.items.append(item)
        self.done = self.done or item["kind"] == "end"
        self._wake.set()
        self._wake = asyncio.Event()

    # -- readers (the event loop) -------------------------------------------------

    async def follow(self, start: int = 0) -> AsyncIterator[tuple[int, Item]]:
        """Items from index `start` on, as they come, ending with the `end` item.

        A reader that already had the `end` item (an EventSource reconnecting) gets it
        again, so it learns the run is over instead of reconnecting for ever.
        """
        i = max(0, min(start, len(self.items) - 1) if self.done else start)
        while True:
            wake = self._wake  # taken before reading, so no item slips between
            while i < len(self.items):
                yield i, self.items[i]
                i += 1
            if self.done:
                return
            await wake.wait()

    # -- the run --------------------------------------------------------------------

    async def drive(self, analyst: Analyst) -> None:
        """Take the run to its approval pause; the feed ends with where it stands."""
        try:
            record = await analyst.aproceed(self.run_id)
        except asyncio.CancelledError:
            self._post(self._feed.end(RUNNING, "stopped: the server is shutting down"))
            raise
        except Exception as exc:  # the record keeps it too; the page shows it
            self._post(self._feed.end(RUNNING, f"{type(exc).__name__}: {exc}"))
        else:
            self._post(self._feed.end(record["status"]))


class LiveRuns:
    """The runs this server started, newest last; the oldest finished ones are forgotten
    past `keep` (their records stay in the store)."""

    def __init__(self, keep: int = 50):
        self.keep = keep
        self._runs: dict[str, LiveRun] = {}

    def get(self, run_id: str) -> LiveRun | None:
        return self._runs.get(run_id)

    def start(self, run_id: str, analyst: Analyst, live: LiveRun) -> None:
        """Drive `live` with `analyst` in a task on the running loop."""
        live.task = asyncio.get_running_loop().create_task(live.drive(analyst))
        self._runs[run_id] = live
        finished = [r for r in self._runs.values() if r.done]
        for old in finished[: max(0, len(self._runs) - self.keep)]:
            del self._runs[old.run_id]

    def running(self) -> set[str]:
        return {run_id for run_id, live in self._runs.items() if not live.done}

    async def stop(self) -> None:
        """Cancel the runs in flight (their records say where they stopped)."""
        tasks = [r.task for r in self._runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
