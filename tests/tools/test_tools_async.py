"""`async def` tools and `ToolRegistry.acall`: on the event loop, off it, and with deadlines."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any, Literal

import pytest
from _cancel_helpers import shaky

from agentloops import Tool, ToolOutcome, ToolRegistry, tool

pytestmark = pytest.mark.anyio

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


@tool
async def fetch(url: str, retries: int = 2) -> dict[str, Any]:
    """Fetch a page.

    Args:
        url: the address
        retries: how often to try again
    """
    await asyncio.sleep(0)
    return {"url": url, "thread": threading.get_ident(), "where": where.get()}


def fetch_sync(url: str, retries: int = 2) -> dict[str, Any]:
    """Fetch a page.

    Args:
        url: the address
        retries: how often to try again
    """
    return {"url": url, "thread": threading.get_ident(), "where": where.get()}


def test_an_async_tools_schema_is_built_like_a_sync_ones():
    sync = Tool.from_function(fetch_sync, name="fetch")
    assert fetch.is_async and not sync.is_async
    assert fetch.input_schema == sync.input_schema
    assert fetch.description == sync.description == "Fetch a page."


async def test_acall_awaits_an_async_tool_on_the_running_loop():
    where.set("caller")
    outcome = await ToolRegistry([fetch]).acall("fetch", {"url": "a"})
    data = eval_json(outcome)
    assert data == {"url": "a", "thread": threading.get_ident(), "where": "caller"}


async def test_acall_runs_a_sync_tool_on_a_thread_without_blocking_the_loop():
    loop_ran = threading.Event()
    where.set("caller")

    def waits_for_the_loop() -> str:
        """Blocks until a coroutine on the caller's loop has run."""
        assert loop_ran.wait(5), "the event loop was blocked"
        return f"{threading.get_ident()} {where.get()}"

    async def on_the_loop() -> None:
        await asyncio.sleep(0.01)
        loop_ran.set()

    registry = ToolRegistry([waits_for_the_loop])
    outcome, _ = await asyncio.gather(registry.acall("waits_for_the_loop", {}), on_the_loop())
    thread, seen = outcome.content.split()
    assert not outcome.is_error and int(thread) != threading.get_ident()
    assert seen == "caller"  # the caller's contextvars travel to the thread


def test_call_runs_an_async_tool_to_completion_from_sync_code():
    outcome = ToolRegistry([fetch]).call("fetch", {"url": "b"})
    assert eval_json(outcome)["url"] == "b" and not outcome.is_error


async def test_call_from_inside_a_running_loop_runs_an_async_tool_on_a_helper_thread():
    outcome = ToolRegistry([fetch]).call("fetch", {"url": "c"})  # blocks this loop: use acall
    data = eval_json(outcome)
    assert data["url"] == "c" and data["thread"] != threading.get_ident()


async def slow_async(seconds: float) -> str:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cancelled.set()
        raise
    return "late"


cancelled = threading.Event()


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_an_async_tools_timeout_cancels_it(how):
    cancelled.clear()
    registry = ToolRegistry([Tool.from_function(slow_async, timeout=0.05)])
    started = time.monotonic()
    outcome = await invoke(registry, how, "slow_async", {"seconds": 10})
    assert time.monotonic() - started < 2
    assert outcome.is_error and outcome.content == "'slow_async' timed out after 0.05 s"
    assert cancelled.is_set()


async def test_a_sync_tools_timeout_holds_under_acall_and_its_thread_is_counted():
    release = threading.Event()

    def hang() -> str:
        release.wait(10)
        return "late"

    hung = Tool.from_function(hang, timeout=0.05)
    outcome = await ToolRegistry([hung]).acall("hang", {})
    assert outcome.content == "'hang' timed out after 0.05 s"
    assert hung.abandoned_threads == 1
    release.set()
    for _ in range(500):
        if not hung.abandoned_threads:
            break
        await asyncio.sleep(0.01)
    assert hung.abandoned_threads == 0


async def test_cancelling_acall_cancels_the_async_tool_and_propagates():
    cancelled.clear()
    registry = ToolRegistry([slow_async])
    task = asyncio.ensure_future(registry.acall("slow_async", {"seconds": 10}))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_cancelling_acall_of_a_sync_tool_leaves_its_thread_counted():
    release = threading.Event()

    def hang() -> str:
        release.wait(10)
        return "late"

    hung = Tool.from_function(hang)
    task = asyncio.ensure_future(ToolRegistry([hung]).acall("hang", {}))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert hung.abandoned_threads == 1
    release.set()


async def test_acall_waits_its_turn_at_the_gate_without_blocking_the_loop():
    inside = 0
    most = 0

    @tool(concurrent=False)
    async def serial(n: int) -> int:
        """Not safe to overlap."""
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.01)
        inside -= 1
        return n

    registry = ToolRegistry([serial])
    outcomes = await asyncio.gather(*(registry.acall("serial", {"n": n}) for n in range(5)))
    assert [o.content for o in outcomes] == ["0", "1", "2", "3", "4"] and most == 1


async def test_a_cancelled_waiter_passes_the_gate_on():
    release = asyncio.Event()

    @tool(concurrent=False)
    async def gated(n: int) -> int:
        """Holds the gate until released."""
        await release.wait()
        return n

    registry = ToolRegistry([gated])
    first = asyncio.ensure_future(registry.acall("gated", {"n": 1}))
    await asyncio.sleep(0.01)
    waiter = asyncio.ensure_future(registry.acall("gated", {"n": 2}))
    third = asyncio.ensure_future(registry.acall("gated", {"n": 3}))
    await asyncio.sleep(0.01)
    waiter.cancel()
    release.set()
    assert (await first).content == "1"
    assert (await asyncio.wait_for(third, 5)).content == "3"
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def boom(size: int) -> str:
    raise ValueError("x" * size)


async def shout(text: str) -> str:
    return text.upper() * 100


@pytest.mark.parametrize("how", ["call", "acall"])
@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("boom", {"size": 3}, "'boom' failed: ValueError: xxx"),
        ("boom", {"size": "many"}, "invalid arguments for 'boom': size: Input should be"),
        ("shout", {"text": "a", "extra": 1}, "extra: Extra inputs are not permitted"),
        ("nope", {}, "unknown tool 'nope'; available tools: boom, shout"),
        ("boom", {"size": 10_000}, "output too long"),
        ("shout", {"text": "ab" * 10}, "output too long"),
    ],
)
async def test_call_and_acall_share_validation_errors_and_the_cap(how, name, args, expected):
    registry = ToolRegistry([boom, shout], max_output_chars=1000)
    outcome = await invoke(registry, how, name, args)
    assert outcome.is_error and expected in outcome.content and len(outcome.content) <= 1000


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_call_and_acall_both_give_each_call_its_own_arguments(how):
    async def mutate(items: Any) -> str:
        items.append("mine")
        return "ok"

    args = {"items": ["a"]}
    outcome = await invoke(ToolRegistry([mutate]), how, "mutate", args)
    assert outcome.content == "ok" and args == {"items": ["a"]}


async def invoke(
    registry: ToolRegistry, how: Literal["call", "acall"], name: str, args: Any
) -> ToolOutcome:
    if how == "acall":
        return await registry.acall(name, args)
    return await asyncio.to_thread(registry.call, name, args)


def eval_json(outcome: ToolOutcome) -> dict[str, Any]:
    import json

    assert not outcome.is_error, outcome.content
    data: dict[str, Any] = json.loads(outcome.content)
    return data


async def test_an_async_call_waiting_at_the_gate_times_out_and_says_so():
    release = asyncio.Event()

    @tool(concurrent=False, timeout=0.2)
    async def held(n: int) -> int:
        """Holds the gate until released, even past its own cancellation."""
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()
            raise
        return n

    registry = ToolRegistry([held])
    first = asyncio.ensure_future(registry.acall("held", {"n": 1}))
    await asyncio.sleep(0.02)
    second = await registry.acall("held", {"n": 2})
    assert second.content == "'held' timed out after 0.2 s waiting for its earlier call to finish"
    release.set()
    assert (await first).content == "'held' timed out after 0.2 s"


async def test_cancelling_a_timed_async_call_cancels_the_tool():
    cancelled.clear()
    registry = ToolRegistry([Tool.from_function(slow_async, timeout=30)])
    task = asyncio.ensure_future(registry.acall("slow_async", {"seconds": 10}))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_call_under_a_running_loop_still_turns_failures_into_outcomes():
    outcome = ToolRegistry([boom]).call("boom", {"size": 2})
    assert outcome.is_error and outcome.content == "'boom' failed: ValueError: xx"


@pytest.mark.parametrize("how", ["call", "acall"])
async def test_a_cancelled_error_the_tool_raises_itself_is_its_failure(how):
    registry = ToolRegistry([shaky])
    if how == "call":  # an async tool from sync code: on a helper thread's event loop
        outcome = await asyncio.to_thread(registry.call, "shaky", {})
    else:
        outcome = await registry.acall("shaky", {})
    assert outcome.is_error
    assert outcome.content.startswith("'shaky' failed: CancelledError")
    assert "something it awaited was cancelled" in outcome.content
