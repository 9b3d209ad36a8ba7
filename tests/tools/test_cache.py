"""`ToolCache`: a read-only tool's results by name and canonical arguments, for a TTL; hits,
misses, expiry on a fake clock, errors never kept, both drivers, the cache given per tool
or as middleware (`CachedTools`), and a durable replay that never consults it."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from agentloops import (
    CachedTools,
    ConfigurationError,
    ModelRetry,
    ToolCache,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from agentloops import ReActLoop as PlainReAct
from agentloops.journal import MemoryStore
from agentloops.testing import ScriptedModel, use_tools


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counted(cache: ToolCache | None = None, name: str = "price") -> tuple[Any, list[str]]:
    runs: list[str] = []

    @tool(name=name, cache=cache)
    def price(ticker: str, fail: bool = False) -> str:
        """A price."""
        runs.append(ticker)
        if fail:
            raise RuntimeError("feed down")
        if ticker == "RETRY":
            raise ModelRetry("say it again")
        return f"{ticker} 187.2"

    return price, runs


def test_a_hit_a_miss_and_expiry_on_the_clock() -> None:
    clock = Clock()
    cache = ToolCache(ttl=60, clock=clock)
    price, runs = counted(cache)
    registry = ToolRegistry([price])
    first = registry.call("price", {"ticker": "AAPL"})
    again = registry.call("price", {"ticker": "AAPL"})  # a hit
    assert again.content == first.content == "AAPL 187.2" and runs == ["AAPL"]
    registry.call("price", {"ticker": "MSFT"})  # other arguments: a miss
    clock.now = 59.9
    registry.call("price", {"ticker": "AAPL"})
    assert runs == ["AAPL", "MSFT"] and (cache.hits, cache.misses) == (2, 2)
    clock.now = 60.0  # the TTL is over: it runs again
    registry.call("price", {"ticker": "AAPL"})
    assert runs == ["AAPL", "MSFT", "AAPL"]


def test_arguments_are_keyed_as_canonical_json() -> None:
    cache = ToolCache()
    cache.put("t", {"a": 1, "b": [1, 2]}, ToolOutcome(content="x"))
    assert cache.get("t", {"b": [1, 2], "a": 1}) is not None
    assert cache.get("t", {"a": 1, "b": [2, 1]}) is None
    assert cache.get("other", {"a": 1, "b": [1, 2]}) is None


def test_an_error_result_is_never_kept() -> None:
    cache = ToolCache(ttl=60)
    price, runs = counted(cache)
    registry = ToolRegistry([price])
    for _ in range(2):
        assert registry.call("price", {"ticker": "AAPL", "fail": True}).is_error
        assert registry.call("price", {"ticker": "RETRY"}).retry
        assert registry.call("price", {"nope": 1}).is_error  # invalid arguments: not run
    assert runs == ["AAPL", "RETRY", "AAPL", "RETRY"] and len(cache) == 0


def test_the_oldest_entry_goes_first() -> None:
    cache = ToolCache(max_entries=2)
    for key in "abc":
        cache.put("t", {"k": key}, ToolOutcome(content=key))
    assert cache.get("t", {"k": "a"}) is None and cache.get("t", {"k": "c"}) is not None


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        ToolCache(ttl=0)
    with pytest.raises(ConfigurationError, match="max_entries"):
        ToolCache(max_entries=0)
    with pytest.raises(ConfigurationError, match="read-only tool only"):

        @tool(read_only=False, cache=ToolCache())
        def send(to: str) -> str:
            """Send."""
            return "sent"

    with pytest.raises(ConfigurationError, match="tool names"):
        CachedTools("price")


def test_a_copy_in_another_process_starts_empty() -> None:
    cache = ToolCache(ttl=5)
    cache.put("t", {}, ToolOutcome(content="x"))
    copy = pickle.loads(pickle.dumps(cache))
    assert len(copy) == 0 and copy.ttl == 5


@pytest.mark.parametrize("how", ["tool", "middleware"])
def test_a_loop_reuses_a_kept_result_under_both_drivers(ReActLoop: Any, how: str) -> None:
    cache = ToolCache(ttl=60)
    price, runs = counted(cache if how == "tool" else None)
    middleware = [CachedTools(["price"], cache)] if how == "middleware" else []
    turns = [use_tools(("price", {"ticker": "AAPL"})) for _ in range(2)]
    parallel = use_tools(("price", {"ticker": "AAPL"}), ("price", {"ticker": "MSFT"}))
    model = ScriptedModel([*turns, parallel, "Done."])
    result = ReActLoop(model, [price], middleware=middleware).run("q")
    assert result.answer == "Done." and result.tool_calls == 4
    assert runs == ["AAPL", "MSFT"]
    last = model.requests[-1].messages[-1].content
    assert [r.content for r in last] == ["AAPL 187.2", "MSFT 187.2"]  # type: ignore[union-attr]


def test_a_durable_replay_never_consults_the_cache() -> None:
    """The outcome of a cached call is journaled like any other; a resumed run answers from
    the journal, even when the cache has expired or been emptied since."""
    clock = Clock()
    cache = ToolCache(ttl=60, clock=clock)
    price, runs = counted(cache)
    store = MemoryStore()
    model = ScriptedModel([use_tools(("price", {"ticker": "AAPL"})) for _ in range(2)] + ["A."])
    loop = PlainReAct(model, [price], store=store)
    assert loop.run("q", run_id="r1").answer == "A." and runs == ["AAPL"]
    outcomes = [r.data["outcome"]["content"] for r in store.read("r1") if r.kind == "tool_finished"]
    assert outcomes == ["AAPL 187.2", "AAPL 187.2"]  # the hit is journaled as an outcome
    hits, misses = cache.hits, cache.misses
    cache.clear()
    clock.now = 1000.0
    assert loop.resume("r1").answer == "A."
    assert (cache.hits, cache.misses) == (hits, misses) and runs == ["AAPL"]


def test_a_cache_on_a_run_store_is_shared_by_every_cache_on_it(durable_store: Any) -> None:
    """Two caches on one store (two processes, say) see each other's results; the TTL
    holds on the clock they share; an error is not kept there either."""
    clock = Clock()
    first = ToolCache(ttl=60, store=durable_store, clock=clock)
    second = ToolCache(ttl=60, store=durable_store, clock=clock)
    first.put("price", {"ticker": "AAPL"}, ToolOutcome(content="187.2", seconds=0.5))
    first.put("price", {"ticker": "BAD"}, ToolOutcome(content="down", is_error=True))
    kept = second.get("price", {"ticker": "AAPL"})
    assert kept is not None and (kept.content, kept.seconds) == ("187.2", 0.5)
    assert second.get("price", {"ticker": "BAD"}) is None
    clock.now = 60.0
    assert second.get("price", {"ticker": "AAPL"}) is None
    first.put("price", {"ticker": "AAPL"}, ToolOutcome(content="188.0"))
    assert second.get("price", {"ticker": "AAPL"}).content == "188.0"  # type: ignore[union-attr]
    second.clear()
    assert first.get("price", {"ticker": "AAPL"}) is None


def test_a_loop_uses_a_cache_on_its_store(tmp_path: Any) -> None:
    from agentloops.journal import SQLiteStore

    with SQLiteStore(tmp_path / "runs.db") as store:
        price, runs = counted(ToolCache(ttl=60, store=store))
        model = ScriptedModel([use_tools(("price", {"ticker": "AAPL"})) for _ in range(2)] + ["A."])
        assert PlainReAct(model, [price], store=store).run("q").answer == "A."
        assert runs == ["AAPL"]
        with pytest.raises(ConfigurationError, match="must be a run store"):
            ToolCache(store=object())


def test_a_middlewares_cache_goes_with_calls_to_an_executor(ReWOOPipeline: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from agentloops.testing import respond_structured

    price, runs = counted()
    steps = [
        {"step_id": f"#E{i}", "description": "price", "tool_name": "price",
         "tool_args": {"ticker": "AAPL"}, "depends_on": [f"#E{i - 1}"] if i > 1 else []}
        for i in (1, 2)
    ]  # fmt: skip
    model = ScriptedModel([respond_structured({"steps": steps}), "AAPL 187.2"])
    with ThreadPoolExecutor(2) as executor:
        rewoo = ReWOOPipeline(
            model, [price], executor=executor, middleware=[CachedTools(["price"], ToolCache())]
        )
        assert rewoo.run("q").answer == "AAPL 187.2"
    assert runs == ["AAPL"]  # the second step was answered from the cache
