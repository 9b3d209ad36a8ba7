"""Under `arun`, blocking work goes to agentloops' own bounded pool, never to the event
loop's default executor: hung sync clients starve no other run, a sync client's call has a
deadline, a hung call never keeps the process from exiting, and thousands of runs with a
blocking tool start no thread per call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentloops import (
    ModelRequest,
    ModelResponse,
    ReActLoop,
    configure_threads,
)
from agentloops.testing import respond

pytestmark = pytest.mark.anyio


class Refusing(concurrent.futures.ThreadPoolExecutor):
    """A default executor that refuses work: nothing a run does may need it."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the event loop's default executor was asked to run {fn!r}")


@pytest.fixture
def settings_kept() -> Iterator[None]:
    before = configure_threads()
    yield
    configure_threads(max_threads=before.max_threads, model_timeout=before.model_timeout)


class Hung:
    """A sync-only client that does not answer until released."""

    def __init__(self, release: threading.Event):
        self.release = release

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.release.wait(30)
        return respond("late")


class Sync:
    """A sync-only client that answers at once."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        return respond("sync answer")


async def quick(request: ModelRequest) -> ModelResponse:
    await asyncio.sleep(0)
    return respond("async answer")


def test_when_hung_calls_fill_the_bound_a_sync_call_fails_at_its_timeout() -> None:
    # In a fresh process: the pool is the process's, and earlier tests leave idle workers.
    code = (
        "import asyncio, threading, time\n"
        "import agentloops\n"
        "from agentloops.testing import respond\n"
        "release = threading.Event()\n"
        "class Hung:\n"
        "    def complete(self, request):\n"
        "        release.wait(30)\n"
        "        return respond('late')\n"
        "class Sync:\n"
        "    def complete(self, request):\n"
        "        return respond('sync answer')\n"
        "def run(model):\n"
        "    try:\n"
        "        return asyncio.run(agentloops.ReActLoop(model, []).arun('q')).answer\n"
        "    except agentloops.ModelError as exc:\n"
        "        return str(exc)\n"
        "agentloops.configure_threads(max_threads=1, model_timeout=0.2)\n"
        "print(run(Hung()))  # the pool's one thread, abandoned\n"
        "print(run(Hung()))  # the one abandoned thread allowed beyond it\n"
        "print(run(Sync()))  # no thread left: queued, and it fails at its timeout\n"
        "release.set()\n"
        "deadline = time.monotonic() + 10\n"
        "while (answer := run(Sync())) != 'sync answer' and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print(answer)  # the hung calls returned: their threads serve again\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hung, hung_again, queued, later = done.stdout.splitlines()
    assert "Hung.complete did not answer within 0.2 s" in hung
    assert "Hung.complete did not answer within 0.2 s" in hung_again
    assert "Sync.complete did not answer within 0.2 s" in queued
    assert later == "sync answer"


async def test_a_sync_client_gets_no_longer_than_the_run_deadline_leaves(
    settings_kept: None,
) -> None:
    configure_threads(model_timeout=60)
    release = threading.Event()
    try:
        started = time.monotonic()
        result = await asyncio.wait_for(ReActLoop(Hung(release), [], deadline=0.3).arun("q"), 10)
        assert result.stop_reason == "deadline"  # the request's timeout, not the 60 s
        assert time.monotonic() - started < 10
    finally:
        release.set()


def test_a_hung_sync_client_never_keeps_the_process_from_exiting() -> None:
    code = (
        "import asyncio, threading\n"
        "import agentloops\n"
        "class Hung:\n"
        "    def complete(self, request):\n"
        "        threading.Event().wait()\n"
        "agentloops.configure_threads(model_timeout=0.2)\n"
        "try:\n"
        "    asyncio.run(agentloops.ReActLoop(Hung(), []).arun('q'))\n"
        "except agentloops.ModelError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ModelError"
