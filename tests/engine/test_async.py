"""What only the asyncio driver has: many runs on one event loop, cancellation, and clients
or tools that must not block the loop. (Every loop's other behaviour runs under both
drivers in its own test file.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from _cancel_helpers import shaky

from agentloops import (
    Event,
    MemoryStore,
    ModelCallStarted,
    ModelRequest,
    ModelResponse,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    ToolCallStarted,
    tool,
)
from agentloops.testing import FunctionModel, ScriptedModel, respond, respond_structured, use_tools

pytestmark = pytest.mark.anyio


async def test_an_async_function_model_answers_arun() -> None:
    async def brain(request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(0)
        return respond(f"saw {request.messages[0].text}")

    result = await ReActLoop(FunctionModel(brain), []).arun("hello")
    assert result.answer == "saw hello"


def test_an_async_function_model_also_answers_run() -> None:
    async def brain(request: ModelRequest) -> str:
        return "from a coroutine"

    assert ReActLoop(FunctionModel(brain), []).run("hi").answer == "from a coroutine"


async def test_many_runs_share_one_event_loop() -> None:
    inside, peak = [0], [0]

    async def brain(request: ModelRequest) -> ModelResponse:
        inside[0] += 1
        peak[0] = max(peak[0], inside[0])
        await asyncio.sleep(0.01)
        inside[0] -= 1
        if len(request.messages) == 1:
            return use_tools(("double", {"x": len(request.messages[0].text)}))
        return respond(request.messages[-1].tool_results[0].content)

    @tool
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    loop = ReActLoop(FunctionModel(brain), [double])
    results = await asyncio.gather(*(loop.arun("x" * n) for n in range(1, 51)))
    assert [r.answer for r in results] == [str(2 * n) for n in range(1, 51)]
    assert peak[0] > 10  # the runs waited on their model calls at the same time


class SyncOnly:
    """A client with only `complete`: under `arun` it must run off the event loop."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.threads.append(threading.get_ident())
        return respond("ok")


async def test_a_sync_only_client_runs_in_a_worker_thread() -> None:
    client = SyncOnly()
    assert (await ReActLoop(client, []).arun("q")).answer == "ok"
    assert client.threads and client.threads[0] != threading.get_ident()


async def test_a_sync_tool_runs_in_a_worker_thread_under_arun() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Which thread."""
        threads.append(threading.get_ident())
        return "here"

    model = ScriptedModel([use_tools(("where", {})), "ok"])
    await ReActLoop(model, [where]).arun("q")
    assert threads and threads[0] != threading.get_ident()


async def test_cancelling_arun_cancels_the_model_call_in_flight() -> None:
    calling, cancelled = asyncio.Event(), asyncio.Event()
    events: list[Event] = []

    async def slow(request: ModelRequest) -> ModelResponse:
        calling.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("not cancelled")  # pragma: no cover

    task = asyncio.create_task(ReActLoop(FunctionModel(slow), [], on_event=events.append).arun("q"))
    await calling.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    assert [type(e).__name__ for e in events] == ["RunStarted", "ModelCallStarted"]


async def test_cancelling_arun_mid_tool_ends_the_run_without_waiting_for_the_thread() -> None:
    release = threading.Event()
    events: list[Event] = []

    @tool
    def stuck() -> str:
        """Blocks until released."""
        release.wait(30)
        return "late"

    model = ScriptedModel([use_tools(("stuck", {}), ("stuck", {})), "never"])
    loop = ReActLoop(model, [stuck], on_event=events.append)
    task = asyncio.create_task(loop.arun("q"))
    while sum(isinstance(e, ToolCallStarted) for e in events) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    try:
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
    finally:
        release.set()
    assert model.calls == 1  # the run ended there: the model was not asked again


async def test_a_plan_and_execute_run_cancelled_mid_step_keeps_its_saved_plan() -> None:
    started = asyncio.Event()

    async def brain(request: ModelRequest) -> ModelResponse:
        if request.output is not None:
            return respond_structured({"steps": [{"step_number": 1, "description": "wait"}]})
        started.set()
        await asyncio.sleep(60)
        raise AssertionError("not cancelled")  # pragma: no cover

    pe = PlanAndExecute(FunctionModel(brain), [])
    task = asyncio.create_task(pe.arun("t", run_id="c1"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    status = pe.status("c1")  # what finished is still there: the plan
    assert [s.description for s in status.plan.steps] == ["wait"]


async def test_rewoo_steps_start_as_their_dependencies_finish_under_asyncio() -> None:
    order: list[str] = []
    gate = threading.Event()

    @tool
    def slow() -> str:
        """Waits for the chain to finish."""
        order.append("slow started")
        assert gate.wait(5)
        return "slow"

    @tool
    def quick(x: str) -> str:
        """Quick."""
        order.append(f"quick {x}")
        if x == "b.":
            gate.set()
        return x + "."

    plan = {
        "steps": [
            {"step_id": "#E1", "description": "s", "tool_name": "slow", "tool_args": {}},
            {"step_id": "#E2", "description": "q", "tool_name": "quick", "tool_args": {"x": "b"}},
            {
                "step_id": "#E3",
                "description": "q2",
                "tool_name": "quick",
                "tool_args": {"x": "#E2"},
                "depends_on": ["#E2"],
            },
        ]
    }
    model = ScriptedModel([respond_structured(plan), "done"])
    result = await ReWOOPipeline(model, [slow, quick]).arun("go")
    assert result.evidence["#E1"].content == "slow"  # #E3 ran while #E1 was still waiting
    assert result.evidence["#E3"].content == "b.."


async def test_model_calls_are_awaited_in_the_runs_own_task() -> None:
    tasks: set[Any] = set()

    async def brain(request: ModelRequest) -> str:
        tasks.add(asyncio.current_task())
        return "ok" if len(request.messages) > 1 else "first"

    events: list[Event] = []
    await ReActLoop(FunctionModel(brain), [], on_event=events.append).arun("q")
    assert len(tasks) == 1 and sum(isinstance(e, ModelCallStarted) for e in events) == 1


class GatedStore(MemoryStore):
    """A store whose `start` and `acquire` wait at a gate the test opens: a lease being
    taken while the run's task is cancelled (a slow database)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.taken = threading.Event()

    def start(self, run_id: str, **kwargs: Any) -> Any:
        self._wait()
        lease = super().start(run_id, **kwargs)
        self.taken.set()
        return lease

    def acquire(self, run_id: str, **kwargs: Any) -> Any:
        self._wait()
        lease = super().acquire(run_id, **kwargs)
        self.taken.set()
        return lease

    def _wait(self) -> None:
        self.entered.set()
        assert self.gate.wait(10)


@pytest.mark.parametrize("how", ["arun", "aresume", "astream"])
async def test_cancelling_while_the_lease_is_taken_leaves_no_lease_behind(how: str) -> None:
    store = GatedStore()
    loop = ReActLoop(ScriptedModel(["never asked"]), [], store=store, lease_ttl=300)
    if how == "aresume":
        store.gate.set()
        store.release(store.start("r1", kind="react", ttl=30, meta={"format": 1, "task": "q"}))
        store.gate.clear()

    async def drive() -> Any:
        if how == "arun":
            return await loop.arun("q", run_id="r1")
        if how == "aresume":
            return await loop.aresume("r1")
        return [item async for item in loop.astream("q", run_id="r1")]

    task = asyncio.create_task(drive())
    assert await asyncio.to_thread(store.entered.wait, 10)
    task.cancel()
    await asyncio.sleep(0.05)  # the cancellation is in; the lease is still being taken
    store.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(store.taken.wait, 10)  # the store call did finish
    info = store.run_info("r1")
    assert not info.leased and info.holder is None  # given back, not left to lapse in 300 s
    assert loop.model.calls == 0  # type: ignore[attr-defined]


# -- a tool's own CancelledError is its failure; the run's own cancellation propagates ------


@tool
async def steady() -> str:
    """Answers after a moment."""
    await asyncio.sleep(0.01)
    return "steady"


def _results(model: ScriptedModel, turn: int = 1) -> dict[str, Any]:
    last = model.requests[turn].messages[-1]
    return {r.call_id: r for r in last.tool_results}


@pytest.mark.parametrize("calls", [["shaky", "steady"], ["shaky"]], ids=["parallel", "alone"])
async def test_a_tools_own_cancelled_error_is_its_failure_in_a_react_run(calls: list[str]) -> None:
    model = ScriptedModel([use_tools(*((name, {}) for name in calls)), "coped"])
    result = await asyncio.wait_for(ReActLoop(model, [shaky, steady]).arun("q"), 10)
    assert result.answer == "coped" and result.tool_calls == len(calls)
    results = list(_results(model).values())
    assert results[0].is_error and "CancelledError" in results[0].content
    assert [r.content for r in results[1:]] == ["steady"] * (len(calls) - 1)


async def test_a_tools_own_cancelled_error_is_its_failure_in_a_rewoo_run() -> None:
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "a", "tool_name": "shaky", "tool_args": {}},
            {"step_id": "#E2", "description": "b", "tool_name": "steady", "tool_args": {}},
        ]
    }
    model = ScriptedModel([respond_structured(plan), "coped"])
    result = await asyncio.wait_for(ReWOOPipeline(model, [shaky, steady]).arun("q"), 10)
    assert result.answer == "coped"
    assert result.evidence["#E1"].is_error and "CancelledError" in result.evidence["#E1"].content
    assert result.evidence["#E2"].content == "steady"


async def test_a_durable_run_whose_tool_raises_cancelled_error_finishes_and_frees_its_lease() -> (
    None
):
    from agentloops.journal import MemoryStore

    store = MemoryStore()
    model = ScriptedModel([use_tools(("shaky", {}), ("steady", {})), "coped"])
    loop = ReActLoop(model, [shaky, steady], store=store)
    result = await asyncio.wait_for(loop.arun("q", run_id="r1"), 10)
    assert result.answer == "coped"
    info = store.run_info("r1")
    assert info.status == "finished" and not info.leased


async def test_cancelling_arun_during_parallel_async_tools_still_cancels_them() -> None:
    started, cancelled = [], []

    @tool
    async def wait() -> str:
        """Waits a long time."""
        started.append(1)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise
        return "late"  # pragma: no cover

    model = ScriptedModel([use_tools(("wait", {}), ("wait", {})), "never"])
    task = asyncio.create_task(ReActLoop(model, [wait]).arun("q"))
    while len(started) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(cancelled) == 2 and model.calls == 1


async def test_a_tool_that_cancels_its_own_task_in_a_parallel_turn_fails_that_call() -> None:
    @tool
    async def quits() -> str:
        """Cancels the task it runs in (in a parallel turn, the call's own task)."""
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)
        return "never"  # pragma: no cover

    model = ScriptedModel([use_tools(("quits", {}), ("steady", {})), "coped"])
    result = await asyncio.wait_for(ReActLoop(model, [quits, steady]).arun("q"), 10)
    first, second = _results(model).values()
    assert result.answer == "coped" and second.content == "steady"
    assert first.is_error and "cancelled, not by this run" in first.content
