"""How a tool's function runs: inline, on a thread with a deadline, or awaited with one.

Each `Tool` owns a `ToolRuntime`: a gate that lets one call in at a time when the tool
is not thread-safe, and the count of timed-out calls whose threads are still running
(Python cannot kill a thread, so they are abandoned, and counted so they cannot pile
up unseen). Both live with the tool, so they hold across every registry, loop and
driver in the process.

Rule: it runs functions; it knows no registry, loop or driver.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from agentloops import _pool

if TYPE_CHECKING:  # asyncio is imported where it is used: `import agentloops` goes
    import asyncio  # without it (about 20 ms less)


class TimedOut(Exception):
    """The call's deadline passed; `waiting` says it never got past the tool's gate."""

    def __init__(self, waiting: bool = False):
        super().__init__()
        self.waiting = waiting


def own_cancel(exc: BaseException) -> bool:
    """Whether `exc` is a `CancelledError` the awaited code raised itself (it awaited
    something that someone else cancelled), not the cancellation of the task awaiting it.

    The task's own cancellation is told by `Task.cancelling()` (Python 3.11); on 3.10,
    which cannot tell them apart, every `CancelledError` is taken as the task's own.
    """
    import sys

    asyncio = sys.modules.get("asyncio")  # no asyncio loaded: nothing can be cancelled
    if asyncio is None or not isinstance(exc, asyncio.CancelledError):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop in this thread: no task of ours was cancelled
        return True
    cancelling = getattr(task, "cancelling", None)
    return task is None or (cancelling is not None and cancelling() == 0)


class _Gate:
    """One call at a time, for threads and event loops alike (FIFO hand-over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiters: deque[threading.Event | tuple[asyncio.AbstractEventLoop, Any]] = deque()

    def acquire(self, timeout: float | None = None) -> bool:
        with self._lock:
            if not self._busy:
                self._busy = True
                return True
            event = threading.Event()
            self._waiters.append(event)
        if event.wait(timeout):
            return True
        with self._lock:
            if event in self._waiters:  # nobody handed it over: give up our place
                self._waiters.remove(event)
                return False
        self.release()  # handed over just as we gave up: pass it on
        return False

    async def aacquire(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        with self._lock:
            if not self._busy:
                self._busy = True
                return
            entry = (loop, loop.create_future())
            self._waiters.append(entry)
        try:
            await entry[1]
        except BaseException:  # cancelled (or timed out by wait_for)
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                    raise
            self.release()  # it was handed to us as we were cancelled: pass it on
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, threading.Event):
                    waiter.set()
                    return
                loop, future = waiter
                try:
                    loop.call_soon_threadsafe(_wake, future)
                    return
                except RuntimeError:  # its event loop is closed: try the next waiter
                    continue
            self._busy = False


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
    # A future cancelled before the wake: its waiter passes the gate on (see aacquire).


class ToolRuntime:
    """A tool's shared call state: its gate (when not concurrent) and its stuck threads."""

    def __init__(self, *, concurrent: bool):
        self.gate = None if concurrent else _Gate()
        self._lock = threading.Lock()
        self.abandoned = 0
        """Calls that timed out (or were cancelled) whose threads are still running."""

    def run(self, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float | None) -> Any:
        """Call a sync function here, or on a thread when there is a deadline."""
        gate = self.gate
        if timeout is None:
            if gate is None:
                return fn(**kwargs)
            gate.acquire()
            try:
                return fn(**kwargs)
            finally:
                gate.release()
        deadline = time.monotonic() + timeout
        if gate is not None and not gate.acquire(timeout):
            raise TimedOut(waiting=True)
        flight = _Flight(self, fn, kwargs)
        flight.start()
        try:
            finished = flight.done.wait(max(0.0, deadline - time.monotonic()))
        except BaseException:  # an interrupt while waiting: the thread goes on without us
            flight.abandon()
            raise
        if not finished and flight.abandon():
            raise TimedOut
        return flight.result()

    async def arun_in_thread(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float | None
    ) -> Any:
        """Await a sync function running on agentloops' shared pool (`agentloops._pool`):
        the event loop never blocks, and no thread is started per call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        await self._aenter(deadline)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return await _pool.run(_PooledCall(self, fn, kwargs), left)
        except _pool.Late:
            raise TimedOut from None

    async def arun(
        self,
        fn: Callable[..., Coroutine[Any, Any, Any]],
        kwargs: dict[str, Any],
        timeout: float | None,
    ) -> Any:
        """Await an async function on this event loop; at the deadline it is cancelled."""
        import asyncio

        deadline = None if timeout is None else time.monotonic() + timeout
        await self._aenter(deadline)
        try:
            if deadline is None:
                return await fn(**kwargs)
            task = asyncio.ensure_future(fn(**kwargs))
            try:
                done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
            except BaseException:  # cancelled from outside: cancel the tool with us
                task.cancel()
                await asyncio.wait({task})
                raise
            if not done:
                task.cancel()
                await asyncio.wait({task})  # a tool that ignores cancellation is waited for
                raise TimedOut
            return task.result()
        finally:
            if self.gate is not None:
                self.gate.release()

    def run_coroutine(
        self,
        fn: Callable[..., Coroutine[Any, Any, Any]],
        kwargs: dict[str, Any],
        timeout: float | None,
    ) -> Any:
        """Run an async function to completion from sync code.

        With no event loop running in this thread it runs here (`asyncio.run`); under a
        running loop it runs on a fresh loop in a helper thread, and the caller waits.
        """
        return finish(self.arun(fn, kwargs, timeout))

    async def _aenter(self, deadline: float | None) -> None:
        import asyncio

        if self.gate is None:
            return
        if deadline is None:
            await self.gate.aacquire()
            return
        try:
            await asyncio.wait_for(self.gate.aacquire(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise TimedOut(waiting=True) from None

    def _abandon(self, delta: int) -> None:
        with self._lock:
            self.abandoned += delta


def finish(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run `coroutine` to completion from sync code: here (`asyncio.run`) when no event loop
    runs in this thread, else on a fresh loop in a helper thread while the caller waits."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: list[tuple[bool, Any]] = []
    ctx = contextvars.copy_context()

    def target() -> None:
        try:
            box.append((True, ctx.run(asyncio.run, coroutine)))
        except BaseException as exc:
            box.append((False, exc))

    helper = threading.Thread(target=target, daemon=True, name="agentloops-async-call")
    helper.start()
    helper.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


class _PooledCall(_pool.Job):
    """One call on the shared pool. Like a `_Flight`, it holds the tool's gate until the
    function returns, and a call its caller stopped waiting for counts as abandoned until
    it finishes."""

    __slots__ = ("_ctx", "_finished", "_left", "_runtime")

    def __init__(self, runtime: ToolRuntime, fn: Callable[..., Any], kwargs: dict[str, Any]):
        super().__init__(self._call, (fn, kwargs))
        self._runtime = runtime
        self._ctx = contextvars.copy_context()
        self._finished = False
        self._left = False

    def _call(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        runtime = self._runtime
        try:
            return self._ctx.run(fn, **kwargs)
        finally:
            if runtime.gate is not None:
                runtime.gate.release()
            with runtime._lock:
                self._finished = True
                if self._left:
                    runtime.abandoned -= 1

    def dropped(self) -> None:  # it never ran: nothing holds the gate for it
        if self._runtime.gate is not None:
            self._runtime.gate.release()

    def orphaned(self) -> None:
        runtime = self._runtime
        with runtime._lock:
            if not self._finished:
                self._left = True
                runtime.abandoned += 1


class _Flight:
    """One call on its own daemon thread, which the caller may stop waiting for.

    The thread holds the tool's gate (taken by the caller) until the function returns,
    so an abandoned call still keeps the next one out while it runs.
    """

    def __init__(
        self,
        runtime: ToolRuntime,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
    ):
        self.runtime = runtime
        self.fn = fn
        self.kwargs = kwargs
        self.done = threading.Event()
        self._outcome: tuple[bool, Any] = (False, None)
        self._lock = threading.Lock()
        self._abandoned = False
        self._ctx = contextvars.copy_context()

    def start(self) -> None:
        name = f"agentloops-tool-{getattr(self.fn, '__name__', 'call')}"
        try:
            threading.Thread(target=self._target, daemon=True, name=name).start()
        except BaseException:  # no thread could be started: nothing holds the gate
            if self.runtime.gate is not None:
                self.runtime.gate.release()
            raise

    def _target(self) -> None:
        try:
            self._outcome = (True, self._ctx.run(self.fn, **self.kwargs))
        except BaseException as exc:
            self._outcome = (False, exc)
        finally:
            if self.runtime.gate is not None:
                self.runtime.gate.release()
            with self._lock:
                self.done.set()
                if self._abandoned:
                    self.runtime._abandon(-1)

    def abandon(self) -> bool:
        """Stop waiting: count the thread as abandoned unless it has just finished."""
        with self._lock:
            if self.done.is_set():
                return False
            self._abandoned = True
            self.runtime._abandon(+1)
            return True

    def result(self) -> Any:
        ok, value = self._outcome
        if not ok:
            raise value
        return value
