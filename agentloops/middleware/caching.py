"""`CachedTools`: a tool-result cache for named read-only tools, given as middleware (the
same `ToolCache` a tool takes as `cache=`, for tools the user did not write).

Rule: middleware only: it marks calls; the cache is consulted where the tool runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from agentloops.errors import ConfigurationError
from agentloops.messages import ToolCall
from agentloops.middleware.hooks import Middleware, MiddlewareContext
from agentloops.tools.cache import ToolCache


class CachedTools(Middleware):
    """Answer calls of the tools named in `tools` from `cache` when the same arguments were
    seen within its `ttl` (keep their results otherwise; never an error result). Name
    read-only tools only: a cached call does not run.

    Examples:
        >>> from agentloops import ReActLoop, tool
        >>> from agentloops.testing import ScriptedModel, use_tools
        >>> runs = []
        >>> @tool
        ... def price(ticker: str) -> str:
        ...     '''A price.'''
        ...     runs.append(ticker)
        ...     return "187.2"
        >>> calls = [use_tools(("price", {"ticker": "AAPL"})) for _ in range(2)]
        >>> loop = ReActLoop(ScriptedModel([*calls, "Done."]), [price],
        ...                  middleware=[CachedTools(["price"], ToolCache(ttl=60))])
        >>> loop.run("AAPL twice?").answer, runs
        ('Done.', ['AAPL'])
    """

    def __init__(self, tools: Collection[str], cache: ToolCache | None = None):
        if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
            raise ConfigurationError("CachedTools takes a collection of tool names")
        self.tools = frozenset(tools)
        self.cache = cache if cache is not None else ToolCache()

    def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> Any:
        if call.name in self.tools:
            ctx.cache_with(self.cache)
        return call

    def fingerprint(self) -> Mapping[str, object]:
        return {"tools": sorted(self.tools)}
