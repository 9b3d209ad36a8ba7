"""The dependency-ready scheduler: dispatch order, failures, abort, and graph checks."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

from agentloops._scheduler import cycles, run_graph
from agentloops.errors import ConfigurationError

WAIT = 5.0  # a safety net against a hang, never an assertion


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(8) as executor:
        yield executor


class Log:
    """A thread-safe record of what happened, in order."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, kind: str, node: str) -> None:
        with self._lock:
            self.lines.append((kind, node))

    def index(self, kind: str, node: str) -> int:
        return self.lines.index((kind, node))


def _value(node: str, log: Log, gates: Mapping[str, threading.Event]) -> str:
    log.add("start", node)
    gate = gates.get(node)
    if gate is not None:
        assert gate.wait(WAIT), f"{node}'s gate never opened"
    log.add("end", node)
    return node.upper()


def preparer(
    log: Log, gates: Mapping[str, threading.Event] | None = None
) -> Callable[[str, Mapping[str, Any]], Any]:
    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        return _value, (node, log, gates or {})

    return prepare


def test_runs_every_node_after_its_dependencies(pool: ThreadPoolExecutor) -> None:
    log = Log()
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    run = run_graph(deps, preparer(log), executor=pool)
    assert run.results == {"a": "A", "b": "B", "c": "C", "d": "D"}
    for node, node_deps in deps.items():
        for dep in node_deps:
            assert log.index("end", dep) < log.index("start", node)
    assert not run.errors and not run.skipped and not run.not_started
    assert run.aborted_by is None


def test_prepare_sees_the_results_of_dependencies(pool: ThreadPoolExecutor) -> None:
    seen: dict[str, dict[str, Any]] = {}

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        seen[node] = dict(results)
        return str.upper, (node,)

    run_graph({"a": [], "b": ["a"]}, prepare, executor=pool)
    assert seen["a"] == {}
    assert seen["b"] == {"a": "A"}


def test_a_dependent_starts_before_an_unrelated_long_node_finishes(
    pool: ThreadPoolExecutor,
) -> None:
    # "long" waits until the chain's last node has run: a scheduler that waited for the
    # whole first wave (long, a) before starting b would never let it finish.
    log = Log()
    chain_done = threading.Event()
    started: list[str] = []

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        if node == "long":
            return _value, (node, log, {"long": chain_done})
        if node == "c":
            return _and_then, (chain_done.set, _value, node, log)
        return _value, (node, log, {})

    run = run_graph(
        {"long": [], "a": [], "b": ["a"], "c": ["b"]},
        prepare,
        executor=pool,
        on_start=started.append,
    )
    assert set(run.results) == {"long", "a", "b", "c"}
    assert log.index("end", "c") < log.index("end", "long")


def _and_then(after: Callable[[], Any], fn: Callable[..., str], node: str, log: Log) -> str:
    value = fn(node, log, {})
    after()
    return value


def test_ties_are_dispatched_in_mapping_order() -> None:
    started: list[str] = []
    with ThreadPoolExecutor(1) as one:
        run_graph(
            {"z": [], "y": [], "x": ["z"], "w": ["z"]},
            lambda n, r: (str.upper, (n,)),
            executor=one,
            on_start=started.append,
        )
    assert started[:2] == ["z", "y"]
    assert started.index("x") < started.index("w")


def test_a_failed_node_skips_its_dependents_and_says_which(pool: ThreadPoolExecutor) -> None:
    skips: list[tuple[str, str, str]] = []
    finished: list[str] = []
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"], "f": []}
    run = run_graph(
        deps,
        lambda n, r: (str.upper, (n,)),
        executor=pool,
        failed=lambda v: v == "B",
        on_skip=lambda n, d, root: skips.append((n, d, root)),
        on_finish=lambda n, v: finished.append(n),
    )
    assert set(run.results) == {"a", "b", "c", "f"}
    assert run.skipped == {"d": "b", "e": "d"}
    assert run.root_cause("e") == "b"
    assert run.root_cause("d") == "b"
    assert skips == [("d", "b", "b"), ("e", "d", "b")]
    assert "d" not in finished and "e" not in finished


def test_an_executor_failure_is_the_nodes_failure(pool: ThreadPoolExecutor) -> None:
    run = run_graph(
        {"a": [], "b": ["a"], "c": []},
        lambda n, r: (_boom, ()) if n == "a" else (str.upper, (n,)),
        executor=pool,
    )
    assert isinstance(run.errors["a"], RuntimeError)
    assert run.skipped == {"b": "a"}
    assert run.results == {"c": "C"}


class RefusingExecutor(Executor):
    """Refuses some calls at submit time, as a remote executor does with unpicklable ones."""

    def __init__(self, refuse: str) -> None:
        self.refuse = refuse

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self.refuse in args:
            raise TypeError(f"cannot pickle {self.refuse!r}")
        return InlineExecutor().submit(fn, *args, **kwargs)


def test_a_call_the_executor_refuses_is_the_nodes_failure() -> None:
    run = run_graph(
        {"a": [], "b": ["a"], "c": []},
        lambda n, r: (str.upper, (n,)),
        executor=RefusingExecutor("a"),
    )
    assert str(run.errors["a"]) == "cannot pickle 'a'"
    assert run.skipped == {"b": "a"}
    assert run.results == {"c": "C"}


def _boom() -> str:
    raise RuntimeError("lost the worker")


def test_abort_stops_dispatching_and_waits_for_running_nodes(pool: ThreadPoolExecutor) -> None:
    # "slow" is running when "bad" fails; it is waited for, but "after_slow" never starts.
    log = Log()
    failure_seen = threading.Event()

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        if node == "bad":
            return str.upper, (node,)
        return _value, (node, log, {"slow": failure_seen})

    def on_finish(node: str, value: Any) -> None:
        if node == "bad":
            failure_seen.set()

    run = run_graph(
        {"slow": [], "bad": [], "after_slow": ["slow"], "after_bad": ["bad"]},
        prepare,
        executor=pool,
        failed=lambda v: v == "BAD",
        abort_on_failure=True,
        on_finish=on_finish,
    )
    assert run.aborted_by == "bad"
    assert run.results == {"bad": "BAD", "slow": "SLOW"}
    assert run.not_started == ["after_slow", "after_bad"]
    assert not run.skipped
    assert ("start", "after_slow") not in log.lines


def test_a_second_failure_while_aborting_keeps_the_first(pool: ThreadPoolExecutor) -> None:
    first_seen = threading.Event()

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        if node == "first":
            return str.upper, (node,)
        return _fail_after, (first_seen,)

    run = run_graph(
        {"first": [], "second": []},
        prepare,
        executor=pool,
        failed=lambda v: True,
        abort_on_failure=True,
        on_finish=lambda n, v: first_seen.set(),
    )
    assert run.aborted_by == "first"
    assert set(run.results) == {"first", "second"}


def _fail_after(gate: threading.Event) -> str:
    assert gate.wait(WAIT)
    return "SECOND"


def test_a_raising_hook_propagates_and_starts_nothing_more(pool: ThreadPoolExecutor) -> None:
    submitted: list[str] = []

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        submitted.append(node)
        return str.upper, (node,)

    def on_finish(node: str, value: Any) -> None:
        raise KeyError("sink bug")

    with pytest.raises(KeyError, match="sink bug"):
        run_graph({"a": [], "b": ["a"]}, prepare, executor=pool, on_finish=on_finish)
    assert submitted == ["a"]


def test_a_raising_hook_cancels_what_has_not_started() -> None:
    gate = threading.Event()
    ran: list[str] = []

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        if node == "first":
            return str.upper, (node,)
        return _record, (node, ran, gate)

    def on_finish(node: str, value: Any) -> None:
        raise KeyError("sink bug")

    with ThreadPoolExecutor(1) as one:
        blocker = one.submit(gate.wait, WAIT)  # holds the only thread: "queued" cannot start
        with pytest.raises(KeyError):
            run_graph(
                {"first": [], "queued": []},
                prepare,
                executor=InlineFirst(one),
                on_finish=on_finish,
            )
        gate.set()
        blocker.result()
    assert ran == []


class InlineFirst(Executor):
    """Runs the first call inline, hands the rest to `pool`."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.calls = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.calls += 1
        if self.calls == 1:
            return InlineExecutor().submit(fn, *args, **kwargs)
        return self.pool.submit(fn, *args, **kwargs)


def _record(node: str, ran: list[str], gate: threading.Event) -> str:
    ran.append(node)
    return node


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ({"a": ["zz"]}, "dependencies name no node: zz"),
        ({"a": ["b"], "b": ["a"]}, "cycles: a -> b -> a"),
        ({"a": ["a"]}, "cycles: a -> a"),
    ],
)
def test_a_broken_graph_is_refused_before_anything_runs(
    pool: ThreadPoolExecutor, deps: dict[str, list[str]], message: str
) -> None:
    submitted: list[str] = []
    with pytest.raises(ConfigurationError, match=message):
        run_graph(deps, lambda n, r: submitted.append(n) or (str, (n,)), executor=pool)
    assert submitted == []


def test_an_empty_graph_runs_nothing(pool: ThreadPoolExecutor) -> None:
    run = run_graph({}, lambda n, r: (str, (n,)), executor=pool)
    assert run.results == {}


def test_a_repeated_dependency_counts_once(pool: ThreadPoolExecutor) -> None:
    run = run_graph({"a": [], "b": ["a", "a"]}, lambda n, r: (str.upper, (n,)), executor=pool)
    assert run.results == {"a": "A", "b": "B"}


class InlineExecutor(Executor):
    """Runs each call at submit time: the scheduler must not depend on thread timing."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def test_works_on_any_executor() -> None:
    run = run_graph(
        {"a": [], "b": ["a"], "c": ["b"]}, lambda n, r: (str.upper, (n,)), executor=InlineExecutor()
    )
    assert run.results == {"a": "A", "b": "B", "c": "C"}


@pytest.mark.parametrize("seed", range(5))
def test_random_dags_respect_every_dependency(seed: int, pool: ThreadPoolExecutor) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(30)]
    deps = {n: rng.sample(nodes[:i], k=min(i, rng.randint(0, 3))) for i, n in enumerate(nodes)}
    log = Log()

    def prepare(node: str, results: Mapping[str, Any]) -> Any:
        return _jitter, (node, log, rng.random() / 1000)

    run = run_graph(deps, prepare, executor=pool)
    assert set(run.results) == set(nodes)
    for node, node_deps in deps.items():
        for dep in node_deps:
            assert log.index("end", dep) < log.index("start", node)


def _jitter(node: str, log: Log, pause: float) -> str:
    log.add("start", node)
    time.sleep(pause)  # varies completion order; asserts never depend on it
    log.add("end", node)
    return node


@pytest.mark.parametrize(
    ("deps", "expected"),
    [
        ({"a": [], "b": ["a"]}, []),
        ({"a": ["a"]}, [["a", "a"]]),
        ({"a": ["b"], "b": ["a"]}, [["a", "b", "a"]]),
        ({"a": ["c"], "b": ["a"], "c": ["b"]}, [["a", "c", "b", "a"]]),
        ({"a": ["b"], "b": ["a"], "c": ["d"], "d": ["c"]}, [["a", "b", "a"], ["c", "d", "c"]]),
        ({"a": ["b", "zz"], "b": ["a", "c"], "c": []}, [["a", "b", "a"]]),
        ({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a", "x"]}, [["x", "a", "b", "c", "x"]]),
    ],
)
def test_cycles_are_named_with_their_members(
    deps: dict[str, list[str]], expected: list[list[str]]
) -> None:
    assert sorted(cycles(deps)) == sorted(expected)
