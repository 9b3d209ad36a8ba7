"""agentloops' own threads: bounded pools for blocking work under asyncio, and daemon
threads on demand for the sync driver's parallel tool calls.

Under `arun`, a sync-only model client, a plain `def` tool and a sync output validator run
on the shared pool, and a store's blocking calls on agentloops' own (`own`: user code that
hangs never keeps a run from opening or writing its journal); never on the event loop's
default executor: a run needs no executor to start, the thread count stays bounded
whatever the number of runs (`agentloops.threads`), and, every thread being a daemon that
nothing joins, a call that hangs never keeps the process from exiting. A call whose caller
stopped waiting (a timeout, a cancellation) is *abandoned*: dropped if it has not started,
left to finish on its own if it has, and its thread no longer counts against the bound (at
most as many abandoned threads again).

Rule: threads only; of agentloops it knows only its settings (`agentloops.threads`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from agentloops.threads import settings

if TYPE_CHECKING:  # asyncio is imported where it is used: `import agentloops` goes without it
    import asyncio

_IDLE_SECONDS = 60.0
"""An idle worker leaves after this long without work."""


class Late(TimeoutError):
    """A job's caller stopped waiting at its timeout (the job's own errors pass as they are)."""


class Job:
    """One call for a worker: `fn(*args)`, its outcome, and who is told when it is done."""

    __slots__ = ("abandoned", "args", "error", "fn", "notify", "started", "value")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]):
        self.fn = fn
        self.args = args
        self.value: Any = None
        self.error: BaseException | None = None
        self.started = False
        self.abandoned = False
        self.notify: Callable[[Job], object] | None = None
        """Called with the job on the worker's thread when it is done (unless abandoned)."""

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def dropped(self) -> None:
        """Called on the worker's thread, instead of `fn`, when the job was abandoned
        before it started."""

    def orphaned(self) -> None:
        """Called on the abandoning thread when the job was abandoned while it ran (it may
        have finished just now: a subclass that counts orphans checks under its own lock)."""


class Pool:
    """Worker threads (daemons) taking jobs in order; at most `limit()` of them working for
    callers that still wait, or any number when `limit` is `None`."""

    def __init__(self, limit: Callable[[], int] | None):
        self._limit = limit
        self._reset()

    def _reset(self) -> None:
        """Forget every worker (in a forked child, none of the parent's exist)."""
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[Job] = deque()
        self._alive = 0
        self._idle = 0
        """Workers waiting for a job, not yet woken for one."""
        self._stuck = 0
        """Workers running an abandoned job: they do not count against the limit."""

    @property
    def threads(self) -> int:
        """The workers alive now."""
        return self._alive

    def submit(self, job: Job) -> None:
        """Queue `job`; an idle worker takes it, or a new one when the limit allows."""
        with self._cond:
            self._jobs.append(job)
            spawn = self._wake_or_spawn()
        if spawn:
            self._spawn()

    def _wake_or_spawn(self) -> bool:
        """Hold the lock. Wake an idle worker, or say whether a new one may start; neither
        when `limit()` workers are busy already (a busy one takes the job when it is done)."""
        limit = None if self._limit is None else self._limit()
        if limit is not None and self._alive - self._stuck - self._idle >= limit:
            return False
        if self._idle:
            self._idle -= 1
            self._cond.notify()
            return False
        if limit is not None and self._alive >= 2 * limit:
            return False
        self._alive += 1
        return True

    def _surplus(self) -> bool:
        """Hold the lock. Whether a worker that just finished a job is one too many (the
        limit was lowered): it leaves, and the others go on with the queue."""
        if self._limit is None:
            return False
        return self._alive - self._stuck - self._idle > self._limit()

    def _spawn(self) -> None:
        try:
            threading.Thread(target=self._work, daemon=True, name="agentloops-worker").start()
        except BaseException:  # no thread could be started: the queued jobs wait for the others
            with self._cond:
                self._alive -= 1
            raise

    def abandon(self, job: Job) -> None:
        """The caller stopped waiting: drop `job` if it has not started; if it runs, its
        thread stops counting against the limit (and another may start for the queue)."""
        with self._cond:
            if job.abandoned or (job.started and job.notify is None):
                return
            job.abandoned = True
            if not job.started:
                return  # the worker that dequeues it calls `dropped`
            self._stuck += 1
            spawn = bool(self._jobs) and self._wake_or_spawn()
        job.orphaned()
        if spawn:
            self._spawn()

    def _work(self) -> None:
        cond, jobs = self._cond, self._jobs
        while True:
            with cond:
                while not jobs:
                    self._idle += 1
                    if not cond.wait(_IDLE_SECONDS):  # timed out: nobody woke this worker
                        self._idle -= 1  # (a wake-up takes the worker off the count itself)
                        if not jobs:
                            self._alive -= 1
                            return
                job = jobs.popleft()
                abandoned = job.abandoned
                job.started = True
            if abandoned:
                job.dropped()
                continue
            try:
                job.value = job.fn(*job.args)
            except BaseException as exc:  # handed to the caller, who raises it
                job.error = exc
            with cond:
                notify = None if job.abandoned else job.notify
                job.notify = None  # done: a late `abandon` changes nothing
                if job.abandoned:
                    self._stuck -= 1
                leave = self._surplus()
                if leave:
                    self._alive -= 1
            if notify is not None:
                notify(job)
            del job, notify
            if leave:
                return


class Takes(Protocol):
    """What `run` hands a job to: a `Pool`, or a store's writer that batches its jobs."""

    def submit(self, job: Job) -> None: ...
    def abandon(self, job: Job) -> None: ...


def _limit() -> int:
    return settings().max_threads


shared = Pool(_limit)
"""The bounded pool for the user's blocking code under asyncio: sync-only model clients,
sync tools, sync output validators."""

own = Pool(_limit)
"""The bounded pool for agentloops' own blocking calls under asyncio: a store's I/O
(opening a durable run, its journal writes, giving its lease back) and a shared rate
budget. Apart from `shared`, so that user code that hangs (and fills that pool's bound)
never keeps a run from opening, writing its journal or letting go of its lease."""

spawned = Pool(None)
"""Threads on demand, reused when idle: the sync driver's parallel tool calls (a call never
waits behind another; a daemon, so an interrupted run's calls do not keep the process up)."""


def _forget_workers() -> None:
    shared._reset()
    own._reset()
    spawned._reset()
    _inboxes.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_workers)


# -- waiting from asyncio -------------------------------------------------------------


class _Inbox:
    """Finished jobs for one event loop, handed over with one wake-up per batch (a wake-up
    is a write to the loop's self-pipe: when many finish at once, one does for all)."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.lock = threading.Lock()
        self.items: list[tuple[Job, asyncio.Future[Any]]] = []

    def put(self, job: Job, future: asyncio.Future[Any]) -> None:
        with self.lock:
            self.items.append((job, future))
            wake = len(self.items) == 1
        if wake:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self.lock:
            items, self.items = self.items, []
        for job, future in items:
            if future.done():  # cancelled meanwhile
                continue
            if job.error is None:
                future.set_result(job.value)
            else:
                future.set_exception(job.error)


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


async def run(job: Job, timeout: float | None = None, pool: Takes = shared) -> Any:
    """Run `job` on `pool` (or whatever takes it) and await its outcome, its worker telling
    this loop through its inbox; after `timeout` seconds (queueing included) raise `Late`.
    Timing out or being cancelled abandons the job."""
    import asyncio

    loop = asyncio.get_running_loop()
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes[loop] = _Inbox(loop)
    future: asyncio.Future[Any] = loop.create_future()
    job.notify = lambda done: inbox.put(done, future)
    pool.submit(job)
    try:
        if timeout is None:
            return await future
        return await asyncio.wait_for(future, timeout)
    except BaseException as exc:
        if future.done() and not future.cancelled():
            raise  # the job's own failure
        pool.abandon(job)
        if isinstance(exc, asyncio.TimeoutError):  # not the builtin one before Python 3.11
            raise Late(f"no answer within {timeout} s") from None
        raise


async def call(
    fn: Callable[..., Any], *args: Any, timeout: float | None = None, pool: Pool = shared
) -> Any:
    """`fn(*args)` on `pool` in a copy of the caller's context (as `asyncio.to_thread`),
    awaited (see `run`)."""
    return await run(Job(contextvars.copy_context().run, (fn, *args)), timeout, pool)


async def through(
    fn: Callable[..., Any],
    *args: Any,
    pool: Pool = own,
    undo: Callable[[Any], object] | None = None,
) -> Any:
    """`fn(*args)` on `pool`, awaited to its end even when the caller is cancelled
    meanwhile: for a call that must not be dropped or left behind (taking or giving back a
    lease). Cancelled, it waits for `fn`, then (when `fn` returned) for `undo(its result)`
    on the pool the same way, and lets the cancellation go on."""
    import asyncio

    task = asyncio.ensure_future(call(fn, *args, pool=pool))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():  # a second cancellation must not leave it either
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        if not task.cancelled() and task.exception() is None and undo is not None:
            await through(undo, task.result(), pool=pool)
        raise


def start(fn: Callable[[], Any]) -> None:
    """Run `fn()` on a daemon thread of its own or an idle one (the sync driver's). `fn`
    must not raise (wrap it)."""
    spawned.submit(Job(fn, ()))
