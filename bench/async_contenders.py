"""The contenders of bench/async_runs.py: one batch of concurrent ReAct runs each.

Every `prepare_*(runs)` builds its runs (fake models with their prebuilt replies, loops
or agents) outside the timing and returns a function that performs the whole batch and
checks every result. A run is nine calls of a trivial tool then the answer "done"; each
model call takes 50 ms (`asyncio.sleep`, or `time.sleep` on the thread pool).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plain_loop import Call, Msg, Reply, Result

STEPS = 10
TOOL_STEPS = STEPS - 1
LATENCY = 0.05
Batch = Callable[[], Any]
"""Performs every run of a batch and checks each result."""


async def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def add_sync(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


# -- plain asyncio loop: the floor -----------------------------------------------------


@dataclass
class PlainAsyncModel:
    replies: list[Reply]
    step: int = 0

    async def acomplete(self, messages: list[Msg]) -> Reply:
        await asyncio.sleep(LATENCY)
        self.step += 1
        return self.replies[self.step - 1]


async def plain_async_loop(model: PlainAsyncModel, tools: dict[str, Any], task: str) -> str:
    messages = [Msg("user", (task,))]
    for _ in range(STEPS + 1):
        reply = await model.acomplete(messages)
        messages.append(reply.message)
        calls = [b for b in reply.message.content if type(b) is Call]
        if not calls:
            return str(reply.message.content[0])
        results = tuple([Result(c.id, await tools[c.name](**c.args)) for c in calls])
        messages.append(Msg("user", results))
    return ""


def prepare_plain(runs: int) -> Batch:
    def script() -> list[Reply]:
        calls = [Call(f"call_{i}", "add", {"a": i, "b": 1}) for i in range(TOOL_STEPS)]
        return [Reply(Msg("assistant", (c,)), "tool_use") for c in calls] + [
            Reply(Msg("assistant", ("done",)), "end_turn")
        ]

    models = [PlainAsyncModel(script()) for _ in range(runs)]
    tools = {"add": add}

    def batch() -> None:
        async def gather() -> list[str]:
            return await asyncio.gather(*(plain_async_loop(m, tools, "go") for m in models))

        answers = asyncio.run(gather())
        assert answers == ["done"] * runs, answers[:3]
        assert all(m.step == STEPS for m in models)

    return batch


# -- agentloops --------------------------------------------------------------------------


def agentloops_script() -> list[Any]:
    from agentloops import Message, ModelResponse, ToolCall, Usage

    usage = Usage(input_tokens=10, output_tokens=5)
    replies = [
        ModelResponse(
            Message("assistant", (ToolCall(f"call_{i}", "add", {"a": i, "b": 1}),)),
            "tool_use",
            usage,
        )
        for i in range(TOOL_STEPS)
    ]
    return [*replies, ModelResponse(Message.assistant("done"), "end_turn", usage)]


class AsyncFakeModel:
    """Sleeps 50 ms on the event loop, then hands back the run's next prebuilt reply."""

    def __init__(self, replies: list[Any]):
        self._next = iter(replies).__next__

    def complete(self, request: Any) -> Any:
        raise AssertionError("arun must await acomplete, not call complete in a thread")

    async def acomplete(self, request: Any) -> Any:
        await asyncio.sleep(LATENCY)
        return self._next()


class SyncFakeModel:
    """Sleeps 50 ms on its thread, then hands back the run's next prebuilt reply."""

    def __init__(self, replies: list[Any]):
        self._next = iter(replies).__next__

    def complete(self, request: Any) -> Any:
        time.sleep(LATENCY)
        return self._next()


def check_result(result: Any) -> None:
    assert result.answer == "done" and result.tool_calls == TOOL_STEPS, result.detail
    contents = [r.content for m in result.messages[2::2] for r in m.tool_results]
    assert contents == [str(i + 1) for i in range(TOOL_STEPS)], contents[:3]


@functools.cache
def agentloops_tool() -> tuple[Any, str]:
    """The async tool when this agentloops awaits `async def` tools, else the sync one
    (which `arun` runs through `asyncio.to_thread`), and a note saying which."""
    from agentloops import ReActLoop, ToolRegistry, tool

    async def probe() -> Any:
        loop = ReActLoop(AsyncFakeModel(agentloops_script()), ToolRegistry([add]))
        return await loop.arun("go")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the un-awaited coroutine of an unsupported tool
        result = asyncio.run(probe())
        gc.collect()
    seen = result.messages[2].tool_results[0].content
    if seen == "1":
        return ToolRegistry([add]), "async tool, awaited on the event loop"
    note = f"sync tool via asyncio.to_thread (an async def tool came back as {seen[:24]!r})"
    return ToolRegistry([tool(add_sync, name="add")]), note


def prepare_arun(runs: int) -> Batch:
    from agentloops import ReActLoop

    registry, _ = agentloops_tool()
    loops = [
        ReActLoop(AsyncFakeModel(agentloops_script()), registry, max_steps=STEPS + 1)
        for _ in range(runs)
    ]

    def batch() -> None:
        async def gather() -> list[Any]:
            return await asyncio.gather(*(loop.arun("go") for loop in loops))

        for result in asyncio.run(gather()):
            check_result(result)

    return batch


def _arun_batch(loops: list[Any], ids: list[str] | None = None) -> Batch:
    def batch() -> None:
        async def gather() -> list[Any]:
            if ids is None:
                return await asyncio.gather(*(loop.arun("go") for loop in loops))
            runs = (loop.arun("go", run_id=i) for loop, i in zip(loops, ids, strict=True))
            return await asyncio.gather(*runs)

        for result in asyncio.run(gather()):
            check_result(result)

    return batch


def prepare_arun_def_tool(runs: int) -> Batch:
    """`arun` with a plain `def` tool: it runs on agentloops' bounded pool."""
    from agentloops import ReActLoop, ToolRegistry, tool

    registry = ToolRegistry([tool(add_sync, name="add")])
    loops = [
        ReActLoop(AsyncFakeModel(agentloops_script()), registry, max_steps=STEPS + 1)
        for _ in range(runs)
    ]
    return _arun_batch(loops)


_BATCHES = iter(range(1_000_000))
"""A new prefix of run ids per batch: a store may outlive a batch (the warm-up's)."""


def prepare_durable(store: Any) -> Callable[[int], Batch]:
    """`arun` journaled in `store` (one store for every run of the batch, as a service has)."""

    def prepare(runs: int) -> Batch:
        from agentloops import ReActLoop

        registry, _ = agentloops_tool()
        loops = [
            ReActLoop(
                AsyncFakeModel(agentloops_script()), registry, max_steps=STEPS + 1, store=store
            )
            for _ in range(runs)
        ]
        prefix = f"{os.getpid()}-{time.time_ns()}-{next(_BATCHES)}"
        return _arun_batch(loops, [f"{prefix}-r{i}" for i in range(runs)])

    return prepare


def memory_store() -> Any:
    from agentloops import MemoryStore

    return MemoryStore()


def sqlite_store(synchronous: str) -> Callable[[], Any]:
    def make() -> Any:
        import tempfile
        from pathlib import Path

        from agentloops import SQLiteStore

        where = Path(tempfile.mkdtemp(prefix="agentloops-bench-"))
        return SQLiteStore(where / "runs.db", synchronous=synchronous)  # type: ignore[arg-type]

    return make


def postgres_store(conninfo: str) -> Callable[[], Any]:
    def make() -> Any:
        from agentloops.journal import PostgresStore

        return PostgresStore(conninfo)

    return make


def prepare_threads(runs: int) -> Batch:
    from agentloops import ReActLoop, ToolRegistry, tool
    from agentloops.batch import run_many

    registry = ToolRegistry([tool(add_sync, name="add")])
    loops = [
        ReActLoop(SyncFakeModel(agentloops_script()), registry, max_steps=STEPS + 1)
        for _ in range(runs)
    ]

    def batch() -> None:
        items = run_many(lambda loop: loop.run("go"), loops, max_workers=runs, progress=False)
        for item in items:
            assert item.ok, item.error
            check_result(item.output)

    return batch


# -- pydantic-ai ---------------------------------------------------------------------------


def prepare_pydantic_ai(runs: int) -> Batch:
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    def model() -> FunctionModel:
        # Usage given, as agentloops' replies carry it, so FunctionModel need not estimate it.
        usage = RequestUsage(input_tokens=10, output_tokens=5)
        replies = [
            ModelResponse(
                parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call_{i}")],
                usage=usage,
            )
            for i in range(TOOL_STEPS)
        ]
        script = iter([*replies, ModelResponse(parts=[TextPart("done")], usage=usage)])

        async def reply(messages: Any, info: Any) -> Any:
            await asyncio.sleep(LATENCY)
            return next(script)

        return FunctionModel(reply)

    agent = Agent(tools=[add])
    models = [model() for _ in range(runs)]
    limits = UsageLimits(request_limit=None)

    def batch() -> None:
        async def gather() -> list[Any]:
            return await asyncio.gather(
                *(agent.run("go", model=m, usage_limits=limits) for m in models)
            )

        for out in asyncio.run(gather()):
            assert out.output == "done", out.output
            assert out.usage.tool_calls == TOOL_STEPS, out.usage

    return batch
