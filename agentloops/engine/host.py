"""Where a loop's tool calls run: its registry, optionally an executor (ReWOO's), and, for
a run whose tools include agent tools or handoffs, the tree of runs it belongs to.

Rule: it knows tools and executors, and no loop.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentloops._pickling import ensure_picklable, pickler_for
from agentloops.engine.effects import StartTool
from agentloops.messages import ToolOutcome
from agentloops.tools import ToolRegistry

Caller = Callable[..., ToolOutcome]
"""A registry's `call`: `(name, args, *, key)` to a `ToolOutcome`."""

if TYPE_CHECKING:
    from agentloops.engine.tree import Limits, Node


@dataclass(frozen=True, slots=True)
class ToolHost:
    """The tools a driver runs for one loop.

    Without an `executor`, a lone call runs inline and parallel calls on the driver's own
    threads (or tasks). With one, every call is submitted to it, except the calls of
    hosted tools (agent tools, handoffs): the driver runs those sub-runs itself.
    """

    registry: ToolRegistry
    executor: Executor | None = None
    limits: Limits | None = None
    """What the loop bounds its sub-runs by; given when its tools include hosted ones, so
    each of its runs becomes the top of a tree (`engine.tree`)."""
    node: Node | None = None
    """The run these calls belong to, in its tree (set per run)."""
    session: Any = None
    """The run's durable session (`engine.session.Session`), under which its sub-runs are
    journaled; `None` for a plain run."""

    def caller(self, name: str) -> Caller:
        """What to submit to the executor for calls of tool `name`, as
        `caller(name, args, key=idempotency_key)`.

        A process or cluster executor gets a registry holding only that tool, checked for
        pickling first, so only the tools a run uses travel.

        Raises:
            ConfigurationError: the tool cannot be pickled for the executor (named).
        """
        registry, executor = self.registry, self.executor
        if executor is None or pickler_for(executor) is None:
            return registry.call
        tool = registry.get(name)
        one = ToolRegistry([tool] if tool else [], max_output_chars=registry.max_output_chars)
        ensure_picklable(one, f"tool {name!r}", executor=executor)
        return one.call

    def call(self, effect: StartTool) -> ToolOutcome:
        """One call, here, with its idempotency key set for the tool to read."""
        call = effect.call
        if effect.cache is None:
            return self.registry.call(call.name, call.args, key=effect.call_key)
        return self.registry.call(call.name, call.args, key=effect.call_key, cache=effect.cache)

    async def acall(self, effect: StartTool) -> ToolOutcome:
        """One call under asyncio (an `async def` tool on the loop, a sync one in a
        thread), with its idempotency key set."""
        call = effect.call
        return await self.registry.acall(
            call.name, call.args, key=effect.call_key, cache=effect.cache
        )


NO_TOOLS = ToolHost(ToolRegistry())
"""The host of machines that never call a tool (structured output, a router, an evaluator)."""
