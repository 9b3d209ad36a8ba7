"""Group commit: one writer thread per store and process commits the appends of every run
waiting at that moment in one transaction, and answers each when its records are durable.

Under asyncio a thousand runs each waiting for its own commit would get the throughput of
one (a commit syncs the log: about a millisecond, most of it the disk's). Here each awaits
its place in the next batch; the batch's one commit makes all of them durable together,
and each waiter is told its own outcome (its last seq, or why it was refused: a fenced-out
writer fails alone, the others commit).

Rule: it knows `agentloops._pool`'s jobs and nothing of a backend's tables (the backend's
`commit` does the writing).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from agentloops import _pool

_IDLE_SECONDS = 1.0
"""The writer's thread ends after this long without an append (and starts with the next)."""


class GroupCommit:
    """Appends queued by the event loop, committed by one thread in batches.

    Args:
        commit: writes a batch in one transaction, setting each job's `value` (its last
            seq) or `error` (it was refused, or the transaction failed); called holding no
            lock of this object, on the writer's thread.
        name: the writer thread's name.
    """

    def __init__(self, commit: Callable[[list[_pool.Job]], None], name: str):
        self._commit = commit
        self._name = name
        self._reset()
        _writers.add(self)

    def _reset(self) -> None:
        """Forget the queue and the thread (in a forked child, neither is there)."""
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_pool.Job] = []
        self._running = False

    async def append(self, *args: Any) -> Any:
        """Queue an append (`args` are the backend's) and await its outcome."""
        return await _pool.run(_pool.Job(_unused, args), pool=self)

    def submit(self, job: _pool.Job) -> None:
        with self._cond:
            self._queue.append(job)
            if self._running:
                self._cond.notify()
                return
            self._running = True
        try:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        except BaseException:
            with self._cond:
                self._running = False
                self._queue.remove(job)
            raise

    def abandon(self, job: _pool.Job) -> None:
        """Its waiter is gone (cancelled): dropped if not yet taken; a batch it is in
        commits it all the same (the run finds out when it reads its journal again)."""
        with self._cond:
            if job in self._queue:
                self._queue.remove(job)

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._cond.wait(_IDLE_SECONDS)
                if not self._queue:
                    self._running = False
                    return
                batch, self._queue = self._queue, []
            for job in batch:
                job.started = True
            try:
                self._commit(batch)
            except BaseException as exc:  # a failure of the writer's own: every job's
                for job in batch:
                    if job.error is None and job.value is None:
                        job.error = exc
            for job in batch:
                notify, job.notify = job.notify, None
                if notify is not None and not job.abandoned:
                    notify(job)


_writers: weakref.WeakSet[GroupCommit] = weakref.WeakSet()


def _forget_writers() -> None:
    for writer in list(_writers):
        writer._reset()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_writers)


def _unused() -> None:  # pragma: no cover  (a group commit's job is done by `commit`)
    raise AssertionError("a group commit's job is not run by a pool")
