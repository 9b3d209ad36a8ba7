"""The loop runner: how every loop's runs start, resume, report their status and are driven,
plain or durable, on this thread or the event loop, streamed or not.

A loop hands the runner an `Opening`: a new run (`fresh`), a journaled run to reopen by its
id (`journaled`), or one to resume from what the caller holds (`local`). The runner picks
the run id (`new_run_id`: the one rule), opens the run (a plain one, or a `Session` holding
its lease), builds the loop's machine and drives it with `sync`, `aio` or `streams`. A run
whose tools include agent tools or handoffs is the top of a tree of runs (`engine.tree`).

Rule: the runner knows no loop's decisions (the loops' machines do), and holds no lease
itself (`session` does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from typing import Any, Generic

from agentloops import _pool
from agentloops.engine import _fingerprint, session, streams, sync
from agentloops.engine.decisions import Decisions
from agentloops.engine.durable import journaled
from agentloops.engine.effects import (
    CallModel,
    CheckGuard,
    CheckOutput,
    Machine,
    NextTool,
    R,
    StartTool,
)
from agentloops.engine.fork import Replacement
from agentloops.engine.host import ToolHost
from agentloops.engine.meter import Meter, metered
from agentloops.engine.subruns import AgentTool, outcome
from agentloops.engine.tree import Limits, Node, tracked
from agentloops.errors import AgentLoopsError, CallInDoubt, ConfigurationError, RunNotFound
from agentloops.events import Event, EventSink
from agentloops.journal.records import Entry, RunStore
from agentloops.messages import ToolOutcome

Opener = Callable[[], session.Hold]
Make = Callable[[dict[str, Any]], Machine[R]]
"""Builds the machine from the run's stored meta (`{}` for a plain run)."""
Opening = Callable[[bool], tuple[Opener, Make[R]]]
"""How to open one run, given whether someone observes it (a sink, or a stream)."""
Build = Callable[[str, bool], Machine[R]]
"""A new run's machine, from its run id and whether it is observed."""
Rebuild = Callable[[dict[str, Any], str, bool], Machine[R]]
"""A journaled run's machine, from its stored meta, its run id and whether it is observed."""
Fingerprint = Callable[[], _fingerprint.Parts]
"""What the loop's decisions depend on (`engine._fingerprint`): its prompts, tools, limits."""


def new_run_id() -> str:
    """A fresh run id (twelve hex digits): the one rule for a run the caller gave no id,
    whether the runner opens it or a loop's `machine()` (or a ReWOO stage) is called alone.
    A machine never makes one: its id comes in, like its outcomes."""
    return os.urandom(6).hex()


class Runner(Generic[R]):
    """The drivers of one loop's runs.

    Args:
        kind: the loop's name, stored with each durable run (`RunInfo.kind`).
        store: a `RunStore` to journal runs in, or `None` for plain runs
            (`ConfigurationError` for anything else).
        lease_ttl: seconds a durable run's lease lasts without renewal.
        meter: makes each run's `Meter` (its cost, `max_cost` and deadline) when the loop
            prices its calls or limits them (`engine.meter.meter_for`); `None`: runs are
            not metered at all.
        forget_finished: delete each run from `store` when it finishes (a loop's private
            store, which keeps only what can still be resumed).
        milestones: the loop emits events no outcome holds (plans, steps: the durable
            wrapper's `MILESTONES`): its durable runs are built to emit them, observed or
            not, so their journal keeps them for `agentloops.events.replay_events`.

    It holds no reference to its loop (a copied or pickled loop gets a runner of its own):
    each call is given what it needs, the `ToolHost` a run's tool calls go to included.
    """

    __slots__ = ("durability", "kind", "meter", "milestones")

    def __init__(
        self,
        kind: str,
        store: RunStore | None,
        lease_ttl: float,
        meter: Callable[[], Meter] | None = None,
        *,
        forget_finished: bool = False,
        milestones: bool = False,
    ):
        self.kind = kind
        self.durability = (
            None
            if store is None
            else session.Durability(session.check_store(store), lease_ttl, forget_finished)
        )
        self.meter = meter
        self.milestones = milestones

    # -- openings --------------------------------------------------------------------

    def fresh(
        self,
        build: Build[R],
        run_id: str | None,
        meta: Callable[[], Mapping[str, Any]],
        fingerprint: Fingerprint,
    ) -> Opening[R]:
        """A new run under `run_id` (or a new one): journaled, with `meta()` and the loop's
        `fingerprint()` kept in its header, when the loop has a store (`RunExists` if the
        id is taken)."""
        run_id = run_id or new_run_id()
        d = self.durability

        def opening(observed: bool) -> tuple[Opener, Make[R]]:
            # built first: a bad task raises before a write
            machine = build(run_id, observed or (d is not None and self.milestones))
            if d is None:  # no meta to build: the common, quick way
                return session.plain, self._metered(lambda _: machine)
            kind = self.kind

            def begin() -> session.Session:
                return session.begin(
                    d, kind=kind, run_id=run_id, meta=meta(), fingerprint=fingerprint()
                )

            return begin, self._metered(lambda _: machine)

        return opening

    def journaled(
        self,
        run_id: str,
        decisions: Decisions | None,
        rebuild: Rebuild[R],
        fingerprint: Fingerprint,
        allow_changes: Collection[str] = (),
    ) -> Opening[R]:
        """A journaled run, reopened under its lease with `decisions` recorded first; its
        journal is replayed into the machine `rebuild` makes from the run's stored meta.
        The loop's `fingerprint()` must match the run's, but for the parts named in
        `allow_changes` (the header keeps the new one from then on).

        Raises:
            ConfigurationError: the loop has no store.
        """
        d = self._needs_store("resuming a run by its id")
        kind = self.kind
        allowed = _allowed(allow_changes)

        def opening(observed: bool) -> tuple[Opener, Make[R]]:
            def make(meta: dict[str, Any]) -> Machine[R]:
                return rebuild(meta, run_id, observed or self.milestones)

            def reopen() -> session.Session:
                return session.reopen(
                    d,
                    kind=kind,
                    run_id=run_id,
                    decisions=decisions,
                    fingerprint=fingerprint(),
                    allow_changes=allowed,
                )

            return reopen, self._metered(make)

        return opening

    def forked(
        self,
        run_id: str,
        at: int,
        fork_id: str | None,
        replace: Replacement | None,
        rebuild: Rebuild[R],
        fingerprint: Fingerprint,
    ) -> Opening[R]:
        """A new run, forked from `run_id` at record `at` (`engine.fork`), replayed into the
        machine `rebuild` makes from the source's meta, then going on live. The loop's
        `fingerprint()` must match the source's; the fork's header keeps it.

        Raises:
            ConfigurationError: the loop has no store.
        """
        d = self._needs_store("forking a run")
        kind = self.kind
        new = fork_id or new_run_id()

        def opening(observed: bool) -> tuple[Opener, Make[R]]:
            def make(meta: dict[str, Any]) -> Machine[R]:
                return rebuild(meta, new, observed or self.milestones)

            def open_() -> session.Session:
                return session.fork(
                    d,
                    kind=kind,
                    run_id=run_id,
                    new_run_id=new,
                    at=at,
                    replace=replace,
                    fingerprint=fingerprint(),
                )

            return open_, self._metered(make)

        return opening

    def local(
        self, build: Callable[[bool], Machine[R]], allow_changes: Collection[str] = ()
    ) -> Opening[R]:
        """A run resumed from what the caller holds (a paused result), with no store:
        `build(observed)` makes its machine. Nothing keeps a fingerprint there:
        `allow_changes` is a mistake.

        Raises:
            ConfigurationError: `allow_changes` names anything.
        """
        if _allowed(allow_changes):
            raise ConfigurationError(
                "allow_changes= applies to a run resumed by its id from a store; "
                "this run keeps no fingerprint"
            )

        def opening(observed: bool) -> tuple[Opener, Make[R]]:
            machine = build(observed)
            return session.plain, self._metered(lambda _: machine)

        return opening

    def _metered(self, make: Make[R]) -> Make[R]:
        """`make`, its machine inside the run's meter, made with the machine: the deadline
        counts from when the run is open (its lease held) and driven."""
        meter = self.meter
        if meter is None:
            return make
        return lambda meta: metered(make(meta), meter())

    # -- drivers ---------------------------------------------------------------------

    @staticmethod
    def run(opening: Opening[R], host: ToolHost, on_event: EventSink | None) -> R:
        """Drive the run here to its result, handing every event to `on_event`."""
        observed = on_event is not None
        open_, make = opening(observed)
        with open_() as held:
            machine, host = _planted(make(held.meta), host, held)
            return sync.run(held.journaled(machine, host, observed), host, on_event)

    @staticmethod
    async def arun(opening: Opening[R], host: ToolHost, on_event: EventSink | None) -> R:
        """`run` on the event loop (a durable run is opened, and its lease taken, on
        agentloops' own pool)."""
        from agentloops.engine import aio

        observed = on_event is not None
        open_, make = opening(observed)
        held = await _opened(open_)
        async with held:
            machine, host = _planted(make(held.meta), host, held)
            # what opened the run (closures, the loop's bound methods) is not held through
            # the drive: thousands of runs in flight are that many fewer objects for the
            # garbage collector to go over (docs/benchmarks.md, "What the collector sees")
            del opening, open_, make
            return await aio.run(held.journaled(machine, host, observed), host, on_event)

    @staticmethod
    def stream(
        opening: Opening[R], host: ToolHost, on_event: EventSink | None
    ) -> Iterator[Event | R]:
        """Every event as it happens, then the result; the run opens on the first `next`."""
        open_, make = opening(True)
        return _stream(open_, make, host, on_event)

    @staticmethod
    def astream(
        opening: Opening[R], host: ToolHost, on_event: EventSink | None
    ) -> AsyncIterator[Event | R]:
        """`stream` on the event loop."""
        open_, make = opening(True)
        return _astream(open_, make, host, on_event)

    def status(
        self, run_id: str, rebuild: Rebuild[R], host: ToolHost, fingerprint: Fingerprint
    ) -> R:
        """A journaled run's result as far as its journal goes, calling no model or tool and
        taking no lease: a paused or finished run's own result, or, for a run that stopped
        part-way (or is being driven now), its partial result with stop reason "running".

        Raises:
            ConfigurationError: the loop has no store.
            RunNotFound, CheckpointError: no such run, another loop's or a newer one, one
                started with other settings (the loop's `fingerprint()` differs), or a
                damaged journal.
        """
        d = self._needs_store("a run's status by its id")
        info = d.store.run_info(run_id)
        session.check_kind(info, self.kind, run_id)
        _fingerprint.check(run_id, info.meta, fingerprint(), ())
        past = session.streamed(d.store, run_id, info)
        machine = rebuild(dict(info.meta), run_id, False)
        replay = journaled(machine, past, _nowhere, host.registry, observed=False)
        return _replayed(replay, run_id, d.store, host)

    def _needs_store(self, what: str) -> session.Durability:
        if self.durability is None:
            raise ConfigurationError(f"{what} needs a store: give the loop store=")
        return self.durability


def _stream(
    open_: Opener, make: Make[R], host: ToolHost, on_event: EventSink | None
) -> Iterator[Event | R]:
    with open_() as held:
        machine, host = _planted(make(held.meta), host, held)
        yield from streams.stream(held.journaled(machine, host), host, on_event)


async def _astream(
    open_: Opener, make: Make[R], host: ToolHost, on_event: EventSink | None
) -> AsyncIterator[Event | R]:
    held = await _opened(open_)
    async with held:
        machine, host = _planted(make(held.meta), host, held)
        items = streams.astream(held.journaled(machine, host), host, on_event)
        async with contextlib.aclosing(items):  # type: ignore[type-var]
            async for item in items:
                yield item


async def _opened(open_: Opener) -> session.Hold:
    """`open_()` under asyncio. A plain run's opens right here (there is nothing to do); a
    durable run's takes a lease (store I/O) on agentloops' own pool, never the event loop's
    default executor. Cancelled meanwhile, it waits for the store call (a thread cannot be
    stopped) and gives the lease back before the cancellation goes on: a cancelled `arun`
    leaves no lease behind to lapse."""
    if open_ is session.plain:
        return open_()
    held: session.Hold = await _pool.through(open_, undo=_close)
    return held


def _close(held: session.Hold) -> None:
    held.__exit__(None, None, None)


def _allowed(allow_changes: Collection[str]) -> frozenset[str]:
    if isinstance(allow_changes, str) or not all(isinstance(p, str) for p in allow_changes):
        raise ConfigurationError(
            f"allow_changes must be a collection of part names, got {allow_changes!r}"
        )
    return frozenset(allow_changes)


def _planted(
    machine: Machine[R], host: ToolHost, held: session.Hold
) -> tuple[Machine[R], ToolHost]:
    """A run whose tools include agent tools or handoffs (its host has `limits`) becomes
    the top of a tree: counted, and bounding its sub-runs; they are journaled under its
    session."""
    limits = host.limits
    if limits is None:
        return machine, host
    node = Node(limits)
    durable = held if isinstance(held, session.Session) else None
    return tracked(machine, node), dataclasses.replace(host, node=node, session=durable)


def _paused_below(
    effect: StartTool, store: RunStore, host: ToolHost
) -> tuple[str, ToolOutcome] | None:
    """The outcome of an agent tool's call whose sub-run is paused, from its journal."""
    tool = host.registry.get(effect.call.name)
    if not isinstance(tool, AgentTool):
        return None
    run_id = effect.call_key
    try:
        info = store.run_info(run_id)
    except RunNotFound:
        return None
    sub = tool.loop
    below = sub._host()
    machine = sub._rebuilt(dict(info.meta), run_id, False)
    past = session.read(store, run_id, info)
    replay = journaled(machine, past, _nowhere, below.registry, observed=False)
    result = _replayed(replay, run_id, store, below)
    if result.stop_reason != "approval_required":
        return None
    limit = host.registry.max_output_chars
    return effect.call.id, outcome(tool, effect, result, Node(Limits()), 0.0, limit)


class _Frontier(AgentLoopsError):
    """The journal ran out: what comes next would be new work."""


def _nowhere(entries: list[Entry], status: str | None) -> None:
    """A status read writes nothing."""


def _replayed(machine: Machine[R], run_id: str, store: RunStore, host: ToolHost) -> R:
    """Run `machine` on its journal alone, up to where new work would start (a call of an
    agent tool whose sub-run paused is answered with that pause, read from its journal)."""
    outcome: Any = None
    error: Exception | None = None
    paused: list[tuple[str, ToolOutcome]] = []
    try:
        while True:
            effect = machine.send(outcome) if error is None else machine.throw(error)
            outcome, error = None, None
            kind = type(effect)
            if kind is StartTool:
                below = _paused_below(effect, store, host)  # type: ignore[arg-type]
                if below is not None:
                    paused.append(below)
                    continue
            if kind is NextTool and paused:
                outcome = paused.pop(0)
                continue
            if kind in (CallModel, CheckOutput, CheckGuard, StartTool, NextTool):
                error = _Frontier(f"run {run_id!r} goes on from here")
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    except (_Frontier, CallInDoubt) as stopped:  # stopped part-way: say how far it got
        partial: R = dataclasses.replace(stopped.result, stop_reason="running", detail="")
        return partial
