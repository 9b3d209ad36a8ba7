"""Under `arun`, blocking work goes to agentloops' own bounded pools, never to the event
loop's default executor: hung sync clients starve no other run (plain or durable, with the
default executor full too), a sync client's call has a deadline (a wrapped one too), a hung
call never keeps the process from exiting, and thousands of runs with a blocking tool
start no thread per call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest
from _refusing import Refusing

from agentloops import (
    FallbackModel,
    MemoryCheckpointer,
    MemoryStore,
    ModelError,
    ModelRequest,
    ModelResponse,
    OutputContext,
    PlanAndExecute,
    RateLimiter,
    ReActLoop,
    SQLiteStore,
    configure_threads,
    tool,
)
from agentloops.testing import (
    FunctionModel,
    ScriptedModel,
    respond,
    respond_structured,
    use_tools,
)

pytestmark = pytest.mark.anyio


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


async def test_hung_sync_clients_starve_no_other_run(settings_kept: None) -> None:
    asyncio.get_running_loop().set_default_executor(Refusing())
    configure_threads(max_threads=4, model_timeout=0.3)
    release = threading.Event()
    try:
        hung = [asyncio.ensure_future(ReActLoop(Hung(release), []).arun("q")) for _ in range(6)]
        await asyncio.sleep(0.05)  # six hung calls: the pool's four threads, and two queued
        answered = await asyncio.wait_for(ReActLoop(FunctionModel(quick), []).arun("q"), 5)
        assert answered.answer == "async answer"  # an async model needs no thread at all
        failures = await asyncio.wait_for(asyncio.gather(*hung, return_exceptions=True), 10)
        assert all(isinstance(f, ModelError) for f in failures), failures
        assert "Hung.complete did not answer within 0.3 s" in str(failures[0])
        # The hung calls' threads were abandoned and count no more: a sync client still
        # finds one. (The two queued calls may have started as the first ones were
        # abandoned: six stuck threads at most, under the bound of 4 + 4 abandoned.)
        later = await asyncio.wait_for(ReActLoop(Sync(), []).arun("q"), 5)
        assert later.answer == "sync answer"
    finally:
        release.set()


async def test_with_the_default_executor_and_the_pools_bound_full_a_run_still_finishes(
    settings_kept: None, tmp_path: Path
) -> None:
    # The default executor's six threads held by the program's own to_thread calls, and
    # the pool's four by sync clients that do not answer (within this test): an async
    # model's run, plain or durable, neither waits for a thread nor hangs.
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(6))
    configure_threads(max_threads=4, model_timeout=60)
    release = threading.Event()
    try:
        busy = [asyncio.ensure_future(asyncio.to_thread(release.wait, 30)) for _ in range(6)]
        hung = [asyncio.ensure_future(ReActLoop(Hung(release), []).arun("q")) for _ in range(6)]
        await asyncio.sleep(0.05)
        plain = await asyncio.wait_for(ReActLoop(FunctionModel(quick), []).arun("q"), 5)
        assert plain.answer == "async answer"
        durable = ReActLoop(FunctionModel(quick), [], store=SQLiteStore(tmp_path / "runs.db"))
        result = await asyncio.wait_for(durable.arun("q", run_id="d1"), 5)
        assert result.answer == "async answer" and durable.status("d1").stop_reason == "answered"
        assert not any(task.done() for task in hung + busy)  # all still hung meanwhile
    finally:
        release.set()
    assert [r.answer for r in await asyncio.wait_for(asyncio.gather(*hung), 10)] == ["late"] * 6
    await asyncio.wait_for(asyncio.gather(*busy), 10)


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


@tool
def blocking(n: int) -> str:
    """A plain def tool that blocks a moment."""
    time.sleep(0.001)
    return f"n={n}"


def script(request: ModelRequest) -> ModelResponse:
    if len(request.messages) == 1:
        return use_tools(("blocking", {"n": 1}), ("blocking", {"n": 2}))
    return respond(",".join(r.content for r in request.messages[-1].tool_results))


async def test_no_run_asks_the_default_executor(tmp_path: Path) -> None:
    asyncio.get_running_loop().set_default_executor(Refusing())
    stores = [None, MemoryStore(), SQLiteStore(tmp_path / "runs.db")]
    for store in stores:
        for model in (FunctionModel(script), Sync()):
            loop = ReActLoop(model, [blocking], store=store)
            result = await loop.arun("go")
            assert result.answer in ("n=1,n=2", "sync answer")
            if store is not None:
                assert (await loop.aresume(result.run_id)).answer == result.answer
            items = [item async for item in loop.astream("go")]
            assert items[-1].answer == result.answer  # type: ignore[union-attr]

    async def plans(request: ModelRequest) -> ModelResponse:
        if request.output is not None:
            return respond_structured({"steps": [{"step_number": 1, "description": "add"}]})
        return respond("done")

    checkpointed = PlanAndExecute(FunctionModel(plans), [], checkpointer=MemoryCheckpointer())
    assert (await checkpointed.arun("t", run_id="p1")).answer == "done"  # Save: on the pool


class Window:
    """A shared rate window (as `PostgresStore.rate_window` gives) that always admits."""

    def __init__(self) -> None:
        self.admitted = 0

    def admit(self, requests: int | None, tokens: int | None, window: float) -> float:
        self.admitted += 1
        return 0.0

    def spend(self, tokens: int) -> None:
        pass


class SharesRates:
    def __init__(self) -> None:
        self.window = Window()

    def rate_window(self, name: str) -> Window:
        return self.window


class Answer(pydantic.BaseModel):
    text: str


async def test_wrapped_sync_clients_and_sync_validators_ask_no_default_executor(
    settings_kept: None,
) -> None:
    asyncio.get_running_loop().set_default_executor(Refusing())
    shares = SharesRates()
    limited = RateLimiter(Sync(), requests_per_minute=100, store=shares, name="key")
    for model in (limited, FallbackModel([Sync()])):
        assert (await ReActLoop(model, []).arun("q")).answer == "sync answer"
    assert shares.window.admitted == 1  # the shared budget was asked, on agentloops' pool

    seen: list[str] = []

    def check(out: Answer, context: OutputContext) -> None:
        seen.append(threading.current_thread().name)

    typed = ReActLoop(
        ScriptedModel([respond_structured({"text": "hi"})]),
        [],
        output_type=Answer,
        output_validator=check,
    )
    assert (await typed.arun("q")).output == Answer(text="hi")
    assert seen == ["agentloops-worker"]

    configure_threads(model_timeout=0.2)  # a wrapped sync client has model_timeout too
    release = threading.Event()
    try:
        with pytest.raises(ModelError, match=r"Hung\.complete did not answer within 0\.2 s"):
            await asyncio.wait_for(ReActLoop(FallbackModel([Hung(release)]), []).arun("q"), 10)
    finally:
        release.set()


async def test_many_runs_with_a_blocking_tool_start_no_thread_per_call(
    settings_kept: None,
) -> None:
    configure_threads(max_threads=4)
    peak = [0]
    before = threading.active_count()

    @tool
    def work(n: int) -> str:
        """Blocks a moment; notes how many threads are alive."""
        peak[0] = max(peak[0], threading.active_count())
        time.sleep(0.001)
        return str(n)

    def model(request: ModelRequest) -> ModelResponse:
        if len(request.messages) == 1:
            return use_tools(("work", {"n": len(request.messages[0].text)}))
        return respond(request.messages[-1].tool_results[0].content)

    loop = ReActLoop(FunctionModel(model), [work])
    results = await asyncio.gather(*(loop.arun("x" * (n % 7 + 1)) for n in range(400)))
    assert [r.answer for r in results] == [str(n % 7 + 1) for n in range(400)]
    assert peak[0] <= before + 4  # the pool's four, whatever the number of runs


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
