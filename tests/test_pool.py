"""agentloops' own threads: a bounded pool whose abandoned calls free their place, daemon
workers that nothing joins, results handed to the event loop in batches."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from agentloops import _pool

pytestmark = pytest.mark.anyio


class Inside:
    """Counts how many calls are inside at once, and blocks them until `go` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.calls = 0
        self.go = threading.Event()

    def __call__(self, value: Any = None) -> Any:
        with self.lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
        try:
            self.go.wait(10)
            return value
        finally:
            with self.lock:
                self.now -= 1


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


async def test_at_most_the_limit_work_at_once_and_every_call_finishes() -> None:
    pool = _pool.Pool(lambda: 3)
    inside = Inside()
    jobs = [_pool.Job(inside, (i,)) for i in range(40)]
    calls = [asyncio.ensure_future(_pool.run(job, pool=pool)) for job in jobs]
    await asyncio.sleep(0.05)
    assert inside.now == 3 and pool.threads == 3  # the rest wait their turn
    inside.go.set()
    assert await asyncio.gather(*calls) == list(range(40))
    assert inside.most == 3


async def test_a_lowered_limit_holds_for_the_next_calls_though_idle_workers_remain() -> None:
    limit = [4]
    pool = _pool.Pool(lambda: limit[0])
    first = Inside()
    first.go.set()
    await asyncio.gather(*(_pool.run(_pool.Job(first, (i,)), pool=pool) for i in range(4)))
    limit[0] = 1  # four workers idle now, one allowed to work
    inside = Inside()
    calls = [asyncio.ensure_future(_pool.run(_pool.Job(inside, (i,)), pool=pool)) for i in range(5)]
    await asyncio.sleep(0.05)
    assert inside.now == 1
    inside.go.set()
    assert await asyncio.gather(*calls) == list(range(5))
    assert inside.most == 1


async def test_a_call_that_times_out_is_abandoned_and_frees_its_place() -> None:
    pool = _pool.Pool(lambda: 1)
    hung = Inside()
    with pytest.raises(_pool.Late, match=r"no answer within 0\.05 s"):
        await _pool.run(_pool.Job(hung, ()), 0.05, pool=pool)
    # The hung call still holds its thread; the next call gets another one.
    assert await _pool.run(_pool.Job(lambda: "next", ()), 5, pool=pool) == "next"
    assert pool.threads == 2
    hung.go.set()


async def test_abandoned_threads_are_bounded_too() -> None:
    pool = _pool.Pool(lambda: 1)
    hung = Inside()
    for _ in range(2):
        with pytest.raises(_pool.Late):
            await _pool.run(_pool.Job(hung, ()), 0.02, pool=pool)
    assert pool.threads == 2  # at most as many abandoned as the limit again: no third thread
    with pytest.raises(_pool.Late):  # so this one waits in the queue, and gives up there
        await _pool.run(_pool.Job(lambda: "never run", ()), 0.05, pool=pool)
    hung.go.set()
    wait_for(lambda: hung.now == 0)
    assert await _pool.run(_pool.Job(lambda: "later", ()), 5, pool=pool) == "later"


async def test_a_call_abandoned_before_it_started_never_runs() -> None:
    pool = _pool.Pool(lambda: 1)
    blocker, ran, dropped = Inside(), [], []

    class Counted(_pool.Job):
        def dropped(self) -> None:
            dropped.append(True)

    first = asyncio.ensure_future(_pool.run(_pool.Job(blocker, ()), pool=pool))
    await asyncio.sleep(0.02)
    waiting = asyncio.ensure_future(_pool.run(Counted(ran.append, (1,)), pool=pool))
    await asyncio.sleep(0.02)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    blocker.go.set()
    await first
    wait_for(lambda: dropped == [True])
    assert ran == []


async def test_a_calls_own_errors_pass_as_they_are() -> None:
    def fails() -> None:
        raise TimeoutError("the function's own")

    with pytest.raises(TimeoutError, match="the function's own") as caught:
        await _pool.call(fails, timeout=5)
    assert not isinstance(caught.value, _pool.Late)


async def test_many_results_at_once_wake_the_loop_once_per_batch() -> None:
    # Forty calls finish while the loop is busy: they come back in one wake-up.
    loop = asyncio.get_running_loop()
    pool = _pool.Pool(lambda: 8)
    wakes = []
    original = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
        wakes.append(callback)
        return original(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        done = threading.Event()
        jobs = [_pool.Job(done.wait, (5,)) for _ in range(40)]
        calls = [asyncio.ensure_future(_pool.run(job, pool=pool)) for job in jobs]
        await asyncio.sleep(0.02)
        done.set()
        time.sleep(0.1)  # the loop is busy while every call finishes
        assert all(await asyncio.gather(*calls))
    finally:
        loop.call_soon_threadsafe = original  # type: ignore[method-assign]
    assert 1 <= len(wakes) < 10


def test_started_calls_never_wait_behind_each_other() -> None:
    inside = Inside()
    for _ in range(20):
        _pool.start(inside)
    wait_for(lambda: inside.now == 20)  # twenty at once: no limit for the sync driver's
    inside.go.set()
    wait_for(lambda: inside.now == 0)


def test_the_workers_are_daemons_a_hung_call_does_not_keep_the_process() -> None:
    code = (
        "import asyncio, threading\n"
        "from agentloops import _pool\n"
        "async def main():\n"
        "    try:\n"
        "        await _pool.call(threading.Event().wait, timeout=0.1)\n"
        "    except _pool.Late:\n"
        "        print('gave up')\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gave up"


async def test_a_call_runs_in_a_copy_of_the_callers_context() -> None:
    import contextvars

    who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")
    who.set("the caller")
    assert await _pool.call(who.get, timeout=5) == "the caller"


async def test_through_finishes_the_call_and_its_undo_though_cancelled_twice() -> None:
    gate, undone = threading.Event(), []

    def take() -> str:
        assert gate.wait(10)
        return "lease"

    task = asyncio.ensure_future(_pool.through(take, undo=undone.append))
    await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.sleep(0.02)
    task.cancel()  # a second cancellation, while the call still runs
    await asyncio.sleep(0.02)
    assert not task.done()  # it waits for the call: the lease must not be left behind
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert undone == ["lease"]
    assert await _pool.through(lambda: "kept", undo=undone.append) == "kept"
    assert undone == ["lease"]  # not cancelled: nothing undone
