"""The dependency-ready scheduler, driven by hand: dispatch order, failures, abort, limits,
and graph checks. No threads: the test decides which started call finishes next.

Where calls run (threads, asyncio, an executor that fails) is the drivers' business;
tests/rewoo/test_rewoo.py covers it through `ReWOOPipeline`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from agentloops.engine.effects import Emit, NextTool, StartTool
from agentloops.errors import ConfigurationError
from agentloops.events import StepStarted
from agentloops.messages import ToolCall
from agentloops.rewoo._scheduler import GraphRun, cycles, run_graph

Pick = Callable[[list[str]], str]


def start(node: str, results: Mapping[str, Any]) -> StartTool:
    return StartTool(ToolCall(node, "work", {"seen": sorted(results)}), "test", "r1")


def first(running: list[str]) -> str:
    return running[0]


def drive(
    deps: Mapping[str, Sequence[str]],
    *,
    pick: Pick = first,
    value: Callable[[str], Any] = str.upper,
    limit: int = 8,
    **options: Any,
) -> tuple[GraphRun[str, Any], list[tuple[str, str]]]:
    """Run the scheduler's machine: finish one started call at a time, the one `pick`
    chooses, with `value(node)` as its result. Returns the run and a log of what
    happened: ("start", node), ("end", node), ("emit", text)."""
    machine = run_graph(deps, start, limit=limit, **options)
    log: list[tuple[str, str]] = []
    running: list[str] = []
    outcome: Any = None
    try:
        while True:
            effect = machine.send(outcome)
            outcome = None
            if isinstance(effect, StartTool):
                log.append(("start", effect.call.id))
                running.append(effect.call.id)
            elif isinstance(effect, NextTool):
                assert running, "NextTool with nothing running"
                node = pick(running)
                running.remove(node)
                log.append(("end", node))
                outcome = (node, value(node))
            else:
                assert isinstance(effect, Emit)
                log.append(("emit", str(effect.event)))
    except StopIteration as done:
        assert not running, f"the machine returned with {running} still running"
        return done.value, log


def test_runs_every_node_after_its_dependencies() -> None:
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    run, log = drive(deps)
    assert run.results == {"a": "A", "b": "B", "c": "C", "d": "D"}
    for node, node_deps in deps.items():
        for dep in node_deps:
            assert log.index(("end", dep)) < log.index(("start", node))


def test_start_sees_the_results_of_dependencies() -> None:
    seen: dict[str, list[str]] = {}

    def recording(node: str, results: Mapping[str, Any]) -> StartTool:
        seen[node] = sorted(results)
        return start(node, results)

    machine = run_graph({"a": [], "b": ["a"]}, recording, limit=8)
    assert isinstance(next(machine), StartTool) and isinstance(machine.send(None), NextTool)
    assert isinstance(machine.send(("a", "A")), StartTool)
    assert seen == {"a": [], "b": ["a"]}


def test_a_dependent_starts_before_an_unrelated_long_node_finishes() -> None:
    # "long" finishes last; a batch-barrier scheduler would start "c" only after it.
    def short_first(running: list[str]) -> str:
        return next((n for n in running if n != "long"), running[0])

    _, log = drive({"long": [], "b": [], "c": ["b"], "d": ["c"]}, pick=short_first)
    assert log.index(("start", "d")) < log.index(("end", "long"))


def test_ties_are_dispatched_in_mapping_order() -> None:
    _, log = drive({"z": [], "y": [], "x": [], "w": ["z", "y", "x"]})
    assert [n for kind, n in log if kind == "start"] == ["z", "y", "x", "w"]


def test_at_most_limit_calls_run_at_once() -> None:
    _, log = drive({f"n{i}": [] for i in range(7)}, limit=3)
    running = [sum(1 if k == "start" else -1 for k, _ in log[: i + 1]) for i in range(len(log))]
    assert max(running) == 3
    assert len([k for k, _ in log if k == "start"]) == 7


def test_a_failed_node_skips_its_dependents_and_says_which() -> None:
    skips: list[tuple[str, str, str]] = []
    finished: list[str] = []

    def on_skip(n: str, d: str, root: str) -> Iterable[Emit]:
        skips.append((n, d, root))
        return ()

    def on_finish(n: str, v: Any) -> Iterable[Emit]:
        finished.append(n)
        return ()

    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"], "f": []}
    run, _ = drive(deps, failed=lambda v: v == "B", on_skip=on_skip, on_finish=on_finish)
    assert set(run.results) == {"a", "b", "c", "f"}
    assert run.skipped == {"d": "b", "e": "d"}
    assert run.root_cause("e") == "b"
    assert run.root_cause("d") == "b"
    assert skips == [("d", "b", "b"), ("e", "d", "b")]
    assert "d" not in finished and "e" not in finished


def test_hooks_emit_their_events_in_order() -> None:
    def on_start(n: str) -> Iterable[Emit]:
        return [Emit(StepStarted(step_id=n, description=""))]

    _, log = drive({"a": [], "b": ["a"]}, on_start=on_start)
    assert [kind for kind, _ in log] == ["emit", "start", "end", "emit", "start", "end"]
    assert "step_id='a'" in log[0][1] and "step_id='b'" in log[3][1]


def test_abort_stops_dispatching_and_waits_for_running_nodes() -> None:
    # "slow" is running when "bad" fails; it is waited for, but "after_slow" never starts.
    def bad_first(running: list[str]) -> str:
        return "bad" if "bad" in running else running[0]

    run, log = drive(
        {"slow": [], "bad": [], "after_slow": ["slow"], "after_bad": ["bad"]},
        pick=bad_first,
        failed=lambda v: v == "BAD",
        abort_on_failure=True,
    )
    assert run.aborted_by == "bad"
    assert run.results == {"bad": "BAD", "slow": "SLOW"}
    assert set(run.results) | set(run.skipped) == {"slow", "bad"}  # the rest never started
    assert not run.skipped
    assert ("start", "after_slow") not in log


def test_a_second_failure_while_aborting_keeps_the_first() -> None:
    run, _ = drive({"first": [], "second": []}, failed=lambda v: True, abort_on_failure=True)
    assert run.aborted_by == "first"
    assert set(run.results) == {"first", "second"}


def test_a_raising_hook_propagates_and_starts_nothing_more() -> None:
    def on_finish(node: str, value: Any) -> Iterable[Emit]:
        raise KeyError("sink bug")

    with pytest.raises(KeyError, match="sink bug"):
        drive({"a": [], "b": ["a"]}, on_finish=on_finish)


@pytest.mark.parametrize(
    ("deps", "message"),
    [
        ({"a": ["zz"]}, "dependencies name no node: zz"),
        ({"a": ["b"], "b": ["a"]}, "cycles: a -> b -> a"),
        ({"a": ["a"]}, "cycles: a -> a"),
    ],
)
def test_a_broken_graph_is_refused_before_anything_runs(
    deps: dict[str, list[str]], message: str
) -> None:
    started: list[str] = []

    def recording(node: str, results: Mapping[str, Any]) -> StartTool:
        started.append(node)
        return start(node, results)

    with pytest.raises(ConfigurationError, match=message):
        run_graph(deps, recording, limit=8)  # raised on the call, before any effect
    assert started == []


def test_an_empty_graph_runs_nothing() -> None:
    run, log = drive({})
    assert run.results == {} and log == []


def test_a_repeated_dependency_counts_once() -> None:
    run, _ = drive({"a": [], "b": ["a", "a"]})
    assert run.results == {"a": "A", "b": "B"}


@pytest.mark.parametrize("seed", range(5))
def test_random_dags_respect_every_dependency(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(30)]
    deps = {n: rng.sample(nodes[:i], k=min(i, rng.randint(0, 3))) for i, n in enumerate(nodes)}
    run, log = drive(deps, pick=rng.choice, limit=rng.randint(1, 6))
    assert set(run.results) == set(nodes)
    for node, node_deps in deps.items():
        for dep in node_deps:
            assert log.index(("end", dep)) < log.index(("start", node))


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
