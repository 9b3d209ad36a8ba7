"""`ToolCache`: a read-only tool's results kept for a while, keyed by the tool's name and
its arguments as canonical JSON, so the same call made again is answered without running.

A cache is consulted where the tool runs (`ToolRegistry.call`), never in a run's machine:
a durable run journals a cached outcome like any other, and a replay answers from the
journal, never from the cache. An error result is never kept.

Rule: it knows tool outcomes and a clock; no loop, no driver; a store only as the object
its `tool_results()` gives (`agentloops.journal.tool_results`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from agentloops.errors import ConfigurationError
from agentloops.messages import ToolOutcome


class ToolCache:
    """Results of read-only tools, for `ttl` seconds: in this process's memory, or on a
    run store (`store=`), shared by every process that uses it.

    Give one per tool (`@tool(cache=ToolCache(ttl=60))`), one to several tools, or to a
    loop's middleware for named tools (`agentloops.CachedTools`). Thread-safe. A copy sent
    to another process (a process executor) starts empty.

    Args:
        ttl: seconds a result is kept (`None`: until it is pushed out by newer ones).
        max_entries: how many results are kept at most (the oldest used goes first).
        clock: `time.monotonic` (`time.time` with a store: processes share its times;
            tests pass a fake).
        store: a run store (`MemoryStore`, `SQLiteStore`, `PostgresStore`) to keep the
            results in, in a table of their own (`max_entries` does not apply there).

    Examples:
        >>> from agentloops import ToolOutcome
        >>> now = [0.0]
        >>> cache = ToolCache(ttl=60, clock=lambda: now[0])
        >>> cache.put("price", {"ticker": "AAPL"}, ToolOutcome(content="187.2"))
        >>> cache.get("price", {"ticker": "AAPL"}).content
        '187.2'
        >>> now[0] = 61.0
        >>> cache.get("price", {"ticker": "AAPL"}) is None
        True
    """

    def __init__(
        self,
        ttl: float | None = None,
        *,
        max_entries: int = 1024,
        clock: Callable[[], float] | None = None,
        store: Any = None,
    ):
        if ttl is not None and not ttl > 0:
            raise ConfigurationError(f"ToolCache ttl must be > 0 seconds, got {ttl}")
        if max_entries < 1:
            raise ConfigurationError(f"ToolCache max_entries must be >= 1, got {max_entries}")
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock or (time.monotonic if store is None else time.time)
        self.store = store
        self._table: Any = None
        if store is not None:
            results = getattr(store, "tool_results", None)
            if results is None:
                raise ConfigurationError(f"ToolCache store= must be a run store, got {store!r}")
            self._table = results()
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, tuple[float | None, ToolOutcome]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str, args: Mapping[str, Any]) -> ToolOutcome | None:
        """The kept result of tool `name` called with `args`, if one is still fresh."""
        key = cache_key(name, args)
        if self._table is not None:
            kept = self._table.get(key, self.clock())
            with self._lock:
                if kept is None:
                    self.misses += 1
                    return None
                self.hits += 1
            return ToolOutcome(content=kept[0], seconds=kept[1])
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                expires, outcome = entry
                if expires is None or self.clock() < expires:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return outcome
                del self._entries[key]
            self.misses += 1
            return None

    def put(self, name: str, args: Mapping[str, Any], outcome: ToolOutcome) -> None:
        """Keep `outcome` (never an error, a retry or a sub-run's)."""
        if outcome.is_error or outcome.retry or outcome.run is not None:
            return
        expires = None if self.ttl is None else self.clock() + self.ttl
        key = cache_key(name, args)
        if self._table is not None:
            self._table.put(key, (outcome.content, outcome.seconds), expires)
            return
        with self._lock:
            self._entries[key] = (expires, outcome)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        if self._table is not None:
            self._table.clear()
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return True  # an empty cache is still a cache

    def __reduce__(self) -> tuple[Any, ...]:
        # Another process gets an empty cache of the same settings (a lock does not travel),
        # or the same store's.
        return (_empty, (self.ttl, self.max_entries, self.clock, self.store))

    def __repr__(self) -> str:
        return f"ToolCache(ttl={self.ttl!r}, entries={len(self._entries)})"


def _empty(
    ttl: float | None, max_entries: int, clock: Callable[[], float], store: Any
) -> ToolCache:
    return ToolCache(ttl, max_entries=max_entries, clock=clock, store=store)


def cache_key(name: str, args: Mapping[str, Any]) -> str:
    """A call's key: the tool's name and its arguments as canonical JSON."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{name}:{text}"  # a tool's name has no ":" (`a-z A-Z 0-9 _ -`)
