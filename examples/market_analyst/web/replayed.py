"""A run's feed from its journals, for a run this server does not drive: one started by
another process (the command line, another server) or before this server restarted.

The research loop's journal (`RUN_ID/research`) is followed with `afollow` and replayed
into the events a live run emitted (`agentloops.EventReplay`), through the same `Feed`
as a live run's events, so the page draws the plan, the tool calls and the model calls as
it would live, as they are appended when the run is going on elsewhere. The analyst's
stages come from its own record (the route before the research, the draft and the
verdict after), and the last item says where the run stands. What is not journaled is
not in it: the model calls outside the research loop, the "thinking" items and the
streamed text exist only in the server that drives the run. Items are numbered as they
come, so a page that reconnects with `Last-Event-ID` gets the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from agentloops import EventReplay, RunNotFound
from market_analyst.store import AnalystStore, research_run
from market_analyst.web.feed import Feed, Item

FOLLOW_TIMEOUT = 600.0
"""Seconds the feed waits for the research loop's next record before it ends."""


async def journal_feed(
    store: AnalystStore, run_id: str, render: Callable[[str], str], start: int = 0
) -> AsyncIterator[tuple[int, Item]]:
    """The run's feed items from index `start` on, each with its index."""
    record = await run_in_threadpool(store.get, run_id)  # UnknownRun for an unknown id
    feed: Feed | None = None
    n, t = 0, 0.0  # t: the time line's seconds at the latest record
    for item in _stages(record, render, ("route",), t):
        if n >= start:
            yield n, item
        n += 1
    research = research_run(run_id)
    try:
        kind = (await run_in_threadpool(store.runs.run_info, research)).kind
        replay = EventReplay(loop=kind)
        async for journal_record in store.runs.afollow(research, timeout=FOLLOW_TIMEOUT):
            if feed is None:  # the run's time line starts at its first record
                feed = Feed(started=journal_record.at.timestamp())
            t = feed.since(journal_record.at.timestamp())
            for event in replay.events(journal_record):
                item = feed.event(event)
                if item is not None:
                    if n >= start:
                        yield n, item
                    n += 1
    except (RunNotFound, TimeoutError):
        pass  # no research yet (the run stopped before it), or it went quiet
    record = await run_in_threadpool(store.get, run_id)
    end = {**Feed().end(record["status"]), "t": t}
    for item in [*_stages(record, render, ("draft", "verdict"), t), end]:
        if n >= start:
            yield n, item
        n += 1


def _stages(
    record: dict[str, Any], render: Callable[[str], str], stages: tuple[str, ...], t: float
) -> list[Item]:
    """The stage items `record` holds, at `t` on the time line (no record times them)."""
    items = []
    for stage in stages:
        if record.get(stage) is None:
            continue
        extra = {"draft_html": render(record["draft"])} if stage == "draft" else {}
        items.append({**Feed().stage(stage, record, **extra), "t": t})
    return items
