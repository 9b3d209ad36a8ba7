"""Following a run's journal as it is appended: `RunStore.follow` and `afollow`, written once.

Each backend gives a *source*: it reads a page of records after a sequence number (through
a connection of the follower's own) and waits until the journal may have changed (the
memory store's wake-up, SQLite's `data_version` polled at a bounded interval, PostgreSQL's
`LISTEN`). The decisions (which page to read next, when the stream ends, when it has waited
too long) are made here, once, by a small step machine that a blocking and an asyncio
driver perform.

A stream ends after the record that ends a drive (`DRIVE_ENDS`: the run finished, paused,
stopped in doubt or failed) when nothing follows it yet; a later drive's records are read
on through. A follower that reattaches with `after=` the last sequence number it saw ends
at once if that record ended the drive.

Rule: it knows the records and the sources' shape, never a backend (nor `_base`, which
calls it), its SQL, or a driver.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from agentloops.errors import ConfigurationError
from agentloops.journal.records import DRIVE_ENDS, JournalRecord

PAGE = 256
"""Records read per query while catching up."""


class Source(Protocol):
    """Where a follower reads a run's journal, blocking."""

    def page(self, after: int, limit: int) -> list[JournalRecord]:
        """Up to `limit` records with `seq > after`; `RunNotFound` once the run is gone."""
        ...

    def wait(self, timeout: float | None) -> None:
        """Return when the journal may have changed, or after `timeout` seconds."""
        ...

    def close(self) -> None: ...


class AsyncSource(Protocol):
    """`Source` on the event loop."""

    async def page(self, after: int, limit: int) -> list[JournalRecord]: ...
    async def wait(self, timeout: float | None) -> None: ...
    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Page:
    after: int
    limit: int


class _Wait:
    """Wait for a change (at most `left` seconds: `None` for as long as it takes)."""

    __slots__ = ("left",)

    def __init__(self, left: float | None):
        self.left = left


Step = Generator["_Page | _Wait | JournalRecord", Any, None]


def steps(run_id: str, after: int, timeout: float | None) -> Step:
    """The follower's decisions: yields `_Page` (sent back the records), `_Wait` (sent
    back nothing) and the records to hand out; raises `TimeoutError` past `timeout`
    seconds with nothing new."""
    ended = False
    if after > 0:  # reattaching: did the record we saw last end the drive?
        last: list[JournalRecord] = yield _Page(after - 1, 1)
        ended = bool(last) and last[0].seq == after and last[0].kind in DRIVE_ENDS
    seen = after
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        page: list[JournalRecord] = yield _Page(seen, PAGE)
        for record in page:
            yield record
            seen, ended = record.seq, record.kind in DRIVE_ENDS
        if page:
            deadline = None if timeout is None else time.monotonic() + timeout
        if len(page) == PAGE:
            continue  # catching up: more to read at once
        if ended:
            return
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"run {run_id!r}: no new record after seq {seen} for {timeout} s")
        yield _Wait(left)


def check_args(after: object, timeout: object) -> tuple[int, float | None]:
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ConfigurationError(f"after must be a sequence number >= 0, got {after!r}")
    start = after
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ConfigurationError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return start, None if timeout is None else float(timeout)


def follow(
    open_source: Callable[[], Source], run_id: str, after: object, timeout: object
) -> Iterator[JournalRecord]:
    """`steps` driven on this thread (the arguments checked now); the source is opened at
    the first `next` and closed when the stream ends or is closed."""
    start, most = check_args(after, timeout)
    return _follow(open_source, steps(run_id, start, most))


def afollow(
    open_source: Callable[[], AsyncSource], run_id: str, after: object, timeout: object
) -> AsyncIterator[JournalRecord]:
    """`follow` on the event loop."""
    start, most = check_args(after, timeout)
    return _afollow(open_source, steps(run_id, start, most))


def _follow(open_source: Callable[[], Source], machine: Step) -> Iterator[JournalRecord]:
    source = open_source()
    try:
        reply: Any = None
        while True:
            try:
                step = machine.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(step, _Page):
                reply = source.page(step.after, step.limit)
            elif isinstance(step, _Wait):
                source.wait(step.left)
            else:
                yield step
    finally:
        source.close()


async def _afollow(
    open_source: Callable[[], AsyncSource], machine: Step
) -> AsyncIterator[JournalRecord]:
    source = open_source()
    try:
        reply: Any = None
        while True:
            try:
                step = machine.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(step, _Page):
                reply = await source.page(step.after, step.limit)
            elif isinstance(step, _Wait):
                await source.wait(step.left)
            else:
                yield step
    finally:
        await source.close()


class Wakeup:
    """Set from any thread, waited on by one follower: a thread, or a task on `loop`."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self._loop = loop
        self._event = threading.Event()
        self._async = asyncio.Event() if loop is not None else None

    def set(self) -> None:
        if self._async is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._async.set)
        else:
            self._event.set()

    def wait(self, timeout: float | None) -> None:
        self._event.wait(timeout)
        self._event.clear()

    async def await_(self, timeout: float | None) -> None:
        assert self._async is not None
        try:
            await asyncio.wait_for(self._async.wait(), timeout)
        except asyncio.TimeoutError:
            return
        self._async.clear()


def backoff(first: float, most: float) -> Callable[[bool], float]:
    """Poll intervals: `first` after a change, doubling while nothing changes, at most
    `most` (the bound on how late a follower sees a record)."""
    interval = first

    def next_interval(changed: bool) -> float:
        nonlocal interval
        interval = first if changed else min(most, interval * 2)
        return interval

    return next_interval
