"""How tool functions run: one at a time when not thread-safe, and abandoned threads counted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentloops import ConfigurationError, ReActLoop, Tool, ToolRegistry, tool
from agentloops.testing import ScriptedModel, use_tools


class Overlap:
    """Counts how many calls are inside a function at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.most = 0

    def enter(self) -> None:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1


def counting_tools(overlap: Overlap, *, concurrent: bool) -> Tool:
    def bump(n: int) -> int:
        """Not thread-safe."""
        overlap.enter()
        time.sleep(0.02)
        overlap.leave()
        return n

    return Tool.from_function(bump, concurrent=concurrent)


def run_threads(count: int, target: Callable[[int], Any]) -> list[Any]:
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(target, range(count)))


@pytest.mark.parametrize(("concurrent", "most"), [(False, 1), (True, 6)])
def test_concurrent_false_lets_one_call_in_at_a_time(concurrent, most):
    overlap = Overlap()
    registry = ToolRegistry([counting_tools(overlap, concurrent=concurrent)])
    outcomes = run_threads(6, lambda n: registry.call("bump", {"n": n}))
    assert [o.content for o in outcomes] == [str(n) for n in range(6)]
    assert overlap.most == most


def test_the_gate_holds_across_registries_and_loops():
    overlap = Overlap()
    bump = counting_tools(overlap, concurrent=False)
    registries = [ToolRegistry([bump]), ToolRegistry([bump])]
    run_threads(6, lambda n: registries[n % 2].call("bump", {"n": n}))
    assert overlap.most == 1


def test_a_react_turn_serialises_only_the_tool_that_asks_for_it():
    overlap, free = Overlap(), Overlap()
    serial = counting_tools(overlap, concurrent=False)
    parallel = Tool.from_function(counting_tools(free, concurrent=True).fn, name="free")
    calls = [("bump", {"n": n}) for n in range(4)] + [("free", {"n": n}) for n in range(4)]
    model = ScriptedModel([use_tools(*calls), "done"])
    result = ReActLoop(model, [serial, parallel], max_parallel_tools=8).run("go")
    assert result.stop_reason == "answered"
    assert overlap.most == 1 and free.most > 1


def test_the_gate_holds_between_sync_and_async_callers():
    overlap = Overlap()
    registry = ToolRegistry([counting_tools(overlap, concurrent=False)])

    async def both() -> None:
        await asyncio.gather(
            *(registry.acall("bump", {"n": n}) for n in range(3)),
            asyncio.to_thread(registry.call, "bump", {"n": 9}),
        )

    asyncio.run(both())
    assert overlap.most == 1


def test_waiting_at_the_gate_counts_against_the_timeout():
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        return "done"

    registry = ToolRegistry([Tool.from_function(slow, timeout=0.2, concurrent=False)])
    first = threading.Thread(target=registry.call, args=("slow", {}))
    first.start()
    time.sleep(0.05)  # the first call is inside
    started = time.monotonic()
    outcome = registry.call("slow", {})
    assert time.monotonic() - started < 1
    assert outcome.is_error
    assert outcome.content == "'slow' timed out after 0.2 s waiting for its earlier call to finish"
    release.set()
    first.join(5)


def test_an_abandoned_call_keeps_the_gate_until_its_thread_ends():
    release = threading.Event()
    overlap = Overlap()

    def stuck(n: int) -> int:
        overlap.enter()
        release.wait(5)
        overlap.leave()
        return n

    registry = ToolRegistry([Tool.from_function(stuck, timeout=0.05, concurrent=False)])
    assert registry.call("stuck", {"n": 1}).is_error  # timed out, thread still inside
    assert "waiting for its earlier call" in registry.call("stuck", {"n": 2}).content
    release.set()
    deadline = time.monotonic() + 5
    while registry.get("stuck").abandoned_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert registry.call("stuck", {"n": 3}).content == "3"
    assert overlap.most == 1


def test_abandoned_threads_are_counted_and_past_the_bound_calls_are_refused():
    release = threading.Event()
    ran: list[int] = []

    def hang(n: int) -> int:
        ran.append(n)
        release.wait(10)
        return n

    hung = Tool.from_function(hang, timeout=0.02)
    registry = ToolRegistry([hung], max_abandoned_threads=3)
    for n in range(3):
        assert "timed out after 0.02 s" in registry.call("hang", {"n": n}).content
    assert hung.abandoned_threads == 3
    refused = registry.call("hang", {"n": 99})
    assert refused.is_error
    assert refused.content == (
        "'hang' refused: 3 earlier calls timed out and are still running "
        "(max_abandoned_threads=3); the tool looks hung, so it takes no new calls until "
        "they finish"
    )
    assert 99 not in ran  # refused before it started
    release.set()
    deadline = time.monotonic() + 5
    while hung.abandoned_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hung.abandoned_threads == 0
    assert registry.call("hang", {"n": 7}).content == "7"


def test_a_call_that_finishes_in_time_is_never_counted_as_abandoned():
    quick = Tool.from_function(lambda_free_double, timeout=5)
    registry = ToolRegistry([quick], max_abandoned_threads=1)
    for n in range(20):
        assert registry.call("lambda_free_double", {"n": n}).content == str(2 * n)
    assert quick.abandoned_threads == 0


def lambda_free_double(n: int) -> int:
    return 2 * n


def test_max_abandoned_threads_must_be_positive():
    with pytest.raises(ConfigurationError, match="max_abandoned_threads must be >= 1, got 0"):
        ToolRegistry(max_abandoned_threads=0)


@tool(concurrent=False)
def solo(text: str) -> str:
    """A decorated tool that is not thread-safe."""
    return text


def test_the_decorator_takes_concurrent():
    assert (
        solo.concurrent is False and ToolRegistry([solo]).call("solo", {"text": "x"}).content == "x"
    )
