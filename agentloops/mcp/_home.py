"""Where an MCP session lives: an event loop, the caller's or one on a thread of its own.

The SDK's session is bound to the event loop it was opened on. A toolset opened with
`with` gives it an asyncio loop on a daemon thread (the sync drivers need no loop of the
caller's); one opened with `async with` keeps it on the caller's loop. Every call, from any
thread or loop, reaches the session through `Home.wait` (blocking) or `Home.reach`
(awaiting), never by touching it from the wrong loop.

Rule: event loops and threads only: nothing of MCP, of tools or of agentloops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class WrongLoop(RuntimeError):
    """A blocking call from the thread whose event loop the session lives on (it would
    wait for itself forever)."""


class Home:
    """An event loop that runs a session's coroutines, reachable from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread | None):
        self.loop = loop
        self.thread = thread
        """The thread this home started for its loop, or `None` for the caller's loop."""

    @classmethod
    def on_thread(cls, name: str) -> Home:
        """A new event loop, running on a daemon thread until `close`."""
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            try:
                loop.run_forever()
            finally:  # here, on its own thread: the closing thread may run a loop of its own
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=serve, name=f"agentloops-mcp-{name}", daemon=True)
        thread.start()
        started.wait()
        return cls(loop, thread)

    @classmethod
    def here(cls) -> Home:
        """The running event loop (the caller's)."""
        return cls(asyncio.get_running_loop(), None)

    def is_current(self) -> bool:
        """Whether the calling code runs on this home's loop."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the home loop and block this thread until it is done.

        Raises:
            WrongLoop: this thread runs the home loop (blocking here would wait forever).
        """
        if self.is_current():
            coro.close()
            raise WrongLoop("the session lives on the event loop this call would block")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:  # an interrupt while waiting: the call stops with us
            future.cancel()
            raise

    async def reach(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the home loop: directly when that is this loop, else bridged
        (cancelling the caller cancels it there)."""
        if self.is_current():
            return await coro
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the loop this home started (a no-op for the caller's loop)."""
        if self.thread is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
