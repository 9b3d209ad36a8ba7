"""Daemon worker threads for the sync driver's parallel tool calls.

A `ThreadPoolExecutor`'s threads are joined when the interpreter exits, so one slow tool
keeps a process alive long after Ctrl-C. These threads are daemons: an interrupted run
leaves its unfinished calls behind and the process can end. Idle threads are reused and
leave after a minute without work. A forked child starts with none (its parent's
threads do not come along).

Rule: threads only; it knows no effect, tool or loop.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

_IDLE_SECONDS = 60.0

_tasks: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0
"""Idle workers no task has been handed to yet."""


def _forget_workers() -> None:
    """In a forked child: none of the parent's workers exist here, idle or busy."""
    global _tasks, _lock, _idle
    _tasks = queue.SimpleQueue()
    _lock = threading.Lock()
    _idle = 0


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_workers)


def submit(task: Callable[[], Any]) -> None:
    """Run `task()` on a daemon thread: an idle one, or a new one when none is idle, so a
    task never waits behind another. `task` must not raise (wrap it)."""
    global _idle
    with _lock:
        spawn = _idle == 0
        if not spawn:
            _idle -= 1  # that worker is taken by this task
    _tasks.put(task)
    if spawn:
        threading.Thread(target=_work, daemon=True, name="agentloops-tool").start()


def _work() -> None:
    global _idle
    while True:
        try:
            task = _tasks.get(timeout=_IDLE_SECONDS)
        except queue.Empty:
            with _lock:
                if _idle > 0:  # no task is on its way to this worker: leave
                    _idle -= 1
                    return
            continue
        task()
        del task
        with _lock:
            _idle += 1
