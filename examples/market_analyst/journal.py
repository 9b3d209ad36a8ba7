"""The example's own journals on the library's run store: a run held under its lease, the
records appended to it, and the one-line message a second process gets.

The analyst's stages and each trade proposal are journals of their own in `analyst.db`
(a `SQLiteStore`), beside the research loops' journals. Whoever works on one holds its
lease (a `LeaseKeeper` renews it), so a second terminal or the web app gets `RunLeased`
naming the holder and until when; a holder that crashed stops renewing, and its run can
be taken over once the lease lapses (`--lease-ttl`, 30 seconds by default).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from agentloops import LeaseKeeper, RunLeased, RunNotFound, SQLiteStore
from agentloops.journal import Entry, JournalRecord, Lease

LEASED = 75
"""The exit status when another process holds the run (EX_TEMPFAIL: try again later)."""

LEASE_TTL = 30.0
"""Seconds a lease lasts without renewal: how soon a crashed holder's run is free again."""

Fold = Callable[[str, Sequence[JournalRecord]], dict[str, Any]]
"""Turns a journal into the record the rest of the example reads."""


def holder_id(label: str) -> str:
    """Who holds a lease, findable by an operator: `host:pid:random (label)`."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)} ({label})"


def lease_message(exc: RunLeased) -> str:
    """One line naming who holds the run and until when, and what to do about it."""
    until = exc.until.astimezone(dt.timezone.utc)
    left = max(0, round((until - dt.datetime.now(dt.timezone.utc)).total_seconds()))
    return (
        f"{exc.run_id} is held by {exc.holder} until {until:%H:%M:%S} UTC ({left} s): another "
        "process is working on it. Try again after that; a crashed holder's lease lapses then."
    )


def refuse_if_held(runs: SQLiteStore, run_id: str) -> None:
    """Raise `RunLeased` now if another process holds `run_id`, before this one starts
    models or prints anything. (Taking the lease is what decides; this only says it early.)"""
    try:
        info = runs.run_info(run_id)
    except RunNotFound:
        return
    if info.leased and info.holder is not None and info.lease_expires_at is not None:
        raise RunLeased(
            f"run {run_id!r} is leased by {info.holder!r} until {info.lease_expires_at}",
            run_id=run_id,
            holder=info.holder,
            until=info.lease_expires_at,
        )


class Held:
    """A journal held under a lease: append records, read them folded into a record."""

    def __init__(
        self, runs: SQLiteStore, keeper: LeaseKeeper, past: list[JournalRecord], fold: Fold
    ):
        self.runs, self.keeper, self.records, self._fold = runs, keeper, past, fold
        self.run_id = keeper.lease.run_id
        self.record = fold(self.run_id, past)

    def add(
        self,
        kind: str,
        data: Mapping[str, Any],
        *,
        key: str | None = None,
        status: str | None = None,
        also: Sequence[Entry] = (),
    ) -> dict[str, Any]:
        """Append `(kind, data)` (and the `also` entries) in one fenced transaction, with
        the run's new `status`; returns the record folded again."""
        self.keeper.check()  # a lease known lost: stop before writing anything
        entries: list[Entry] = [(kind, data, key), *also]
        self.records += self.runs.append_many(self.keeper.lease, entries, status=status)
        self.record = self._fold(self.run_id, self.records)
        return self.record


@contextmanager
def hold(runs: SQLiteStore, lease: Lease, fold: Fold) -> Iterator[Held]:
    """Work on the run `lease` was taken for while the block runs (the lease renewed in the
    background), then release it: the next process may take the run at once."""
    try:
        past = runs.read(lease.run_id)
        with LeaseKeeper(runs, lease) as keeper:
            yield Held(runs, keeper, past, fold)
    finally:
        runs.release(lease)


# -- the research and trade loops, started or continued ------------------------------------


def drive(
    loop: Any,
    runs: SQLiteStore,
    task: str,
    run_id: str,
    decisions: dict[str, bool] | None = None,
    *,
    ttl: float,
    parent: str | None = None,
) -> Any:
    """Run `loop` as `run_id`, or resume it from its journal if it was started before
    (then nothing on record runs again).

    Call it holding the journal `run_id` belongs to: a lease on `run_id` itself can then
    only be a crashed process's, so it is waited out (for up to two `ttl`s).
    """
    deadline = time.monotonic() + 2 * ttl
    while True:
        try:
            if _exists(runs, run_id):
                return loop.resume(run_id, decisions)
            kwargs = {"parent_run_id": parent} if parent is not None else {}
            return loop.run(task, run_id=run_id, **kwargs)
        except RunLeased as exc:
            time.sleep(_wait(exc, run_id, deadline))


async def adrive(
    loop: Any,
    runs: SQLiteStore,
    task: str,
    run_id: str,
    decisions: dict[str, bool] | None = None,
    *,
    ttl: float,
) -> Any:
    """`drive` on the event loop (`arun` / `aresume`)."""
    deadline = time.monotonic() + 2 * ttl
    while True:
        try:
            if await asyncio.to_thread(_exists, runs, run_id):
                return await loop.aresume(run_id, decisions)
            return await loop.arun(task, run_id=run_id)
        except RunLeased as exc:
            await asyncio.sleep(_wait(exc, run_id, deadline))


def _exists(runs: SQLiteStore, run_id: str) -> bool:
    try:
        runs.run_info(run_id)
    except RunNotFound:
        return False
    return True


def _wait(exc: RunLeased, run_id: str, deadline: float) -> float:
    """How long to wait out a lease on the loop's own run; past the deadline (the holder
    keeps renewing: it is alive, not crashed), or for another run, the error stands."""
    left = (exc.until - dt.datetime.now(dt.timezone.utc)).total_seconds()
    if exc.run_id != run_id or time.monotonic() + left > deadline:
        raise exc
    return max(0.05, left + 0.05)
