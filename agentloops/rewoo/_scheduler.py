"""A dependency-ready scheduler for a graph of tool calls, as a step machine.

Each node is started the moment its last dependency finishes (not in waves), so a short
chain never waits for an unrelated long branch. It decides only what to start and when;
the driver runs the calls (threads, asyncio tasks, or an executor). No model code lives
here: the ReWOO worker uses it.

Rule: it knows effects and nothing of plans, tools or models.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentloops.engine.effects import Effect, Machine, NextTool, StartTool
from agentloops.errors import ConfigurationError

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")

Hook = Callable[..., Iterable[Effect]]
"""A hook returns effects to yield (events to emit), or nothing."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphRun(Generic[K, R]):
    """What the scheduler did with each node."""

    results: dict[K, R]
    """Nodes whose call finished, in the order they finished."""
    skipped: dict[K, K] = field(default_factory=dict)
    """Nodes not run, each mapped to the dependency that failed or was itself skipped."""
    aborted_by: K | None = None
    """The failed node that stopped dispatching (abort mode only)."""

    def root_cause(self, node: K) -> K:
        """The failed node at the bottom of a skipped node's chain of dependencies."""
        while node in self.skipped:
            node = self.skipped[node]
        return node


def _never(_value: Any) -> bool:
    return False


def run_graph(
    deps: Mapping[K, Sequence[K]],
    start: Callable[[K, Mapping[K, R]], StartTool],
    *,
    limit: int,
    failed: Callable[[R], bool] = _never,
    abort_on_failure: bool = False,
    checked: bool = False,
    on_start: Hook | None = None,
    on_finish: Hook | None = None,
    on_skip: Hook | None = None,
) -> Machine[GraphRun[K, R]]:
    """Run every node of a dependency graph, each as soon as its dependencies are done.

    Args:
        deps: each node's dependencies; the mapping's order breaks ties between nodes
            that become ready together.
        start: called when a node is ready, with the results so far; returns the
            `StartTool` effect for it (its call id must be unique in the graph).
        limit: at most this many calls started and not yet finished.
        failed: tells a failed result from a good one; a failed node's dependents are
            skipped (or, with `abort_on_failure`, nothing more is started).
        abort_on_failure: on the first failure start nothing more, wait for the calls
            already running, and return with `aborted_by` set.
        checked: the caller has already ruled out unknown dependencies and cycles.
        on_start, on_finish, on_skip: hooks returning effects to yield (events), in
            event order: `on_start(node)`, `on_finish(node, result)`,
            `on_skip(node, blocking_dependency, failed_root)`.

    Raises:
        ConfigurationError: a dependency names no node, or the graph has a cycle;
            raised when this is called, before anything starts.
    """
    if not checked:
        _check(deps)
    return _run(deps, start, limit, failed, abort_on_failure, on_start, on_finish, on_skip)


def _run(
    deps: Mapping[K, Sequence[K]],
    start: Callable[[K, Mapping[K, R]], StartTool],
    limit: int,
    failed: Callable[[R], bool],
    abort: bool,
    on_start: Hook | None,
    on_finish: Hook | None,
    on_skip: Hook | None,
) -> Machine[GraphRun[K, R]]:
    remaining = {node: len(set(d)) for node, d in deps.items()}
    dependents: dict[K, list[K]] = {node: [] for node in deps}
    for node, d in deps.items():
        for dep in dict.fromkeys(d):
            dependents[dep].append(node)
    results: dict[K, R] = {}
    skipped: dict[K, K] = {}
    aborted_by: K | None = None
    ready = deque(node for node, n in remaining.items() if n == 0)
    running: dict[str, K] = {}  # call id -> node
    where: tuple[str, str] = ("", "")  # the loop and run id of the calls, for NextTool
    stopped = False
    while ready or running:
        while ready and len(running) < limit and not stopped:
            node = ready.popleft()
            effect = start(node, results)
            running[effect.call.id] = node
            where = (effect.loop, effect.run_id)
            if on_start is not None:
                yield from on_start(node)
            yield effect
        if not running:
            break
        call_id, value = yield NextTool(*where)
        node = running.pop(call_id)
        results[node] = value
        if on_finish is not None:
            yield from on_finish(node, value)
        if not failed(value):
            for child in dependents[node]:
                remaining[child] -= 1
                if remaining[child] == 0 and child not in skipped:
                    ready.append(child)
        elif abort:
            if not stopped:
                stopped = True
                aborted_by = node
        else:
            yield from _skip_dependents(node, dependents, skipped, on_skip)
    return GraphRun(results=results, skipped=skipped, aborted_by=aborted_by)


def _skip_dependents(
    node: K,
    dependents: Mapping[K, list[K]],
    skipped: dict[K, K],
    on_skip: Hook | None,
) -> Machine[None]:
    """Mark everything downstream of a failed node as skipped, naming the blocking dependency."""
    todo = deque([node])
    while todo:
        current = todo.popleft()
        for child in dependents[current]:
            if child not in skipped:
                skipped[child] = current
                if on_skip is not None:
                    yield from on_skip(child, current, node)  # `node` failed: the root
                todo.append(child)


def _check(deps: Mapping[K, Sequence[K]]) -> None:
    unknown = sorted({str(d) for ds in deps.values() for d in ds if d not in deps})
    if unknown:
        raise ConfigurationError(f"dependencies name no node: {', '.join(unknown)}")
    loops = cycles(deps)
    if loops:
        named = "; ".join(" -> ".join(str(n) for n in c) for c in loops)
        raise ConfigurationError(f"the graph has cycles: {named}")


def cycles(deps: Mapping[K, Sequence[K]]) -> list[list[K]]:
    """Every cycle's members as a path that ends where it starts (`[a, b, a]`: a needs b,
    b needs a), one path per strongly connected component; self-loops included.
    Dependencies that name no node are ignored."""
    edges = {node: [d for d in dict.fromkeys(ds) if d in deps] for node, ds in deps.items()}
    # Kahn's pass peels off every node that can run; only what is left can be on a cycle.
    waiting = {node: len(ds) for node, ds in edges.items()}
    dependents: dict[K, list[K]] = {node: [] for node in edges}
    for node, ds in edges.items():
        for dep in ds:
            dependents[dep].append(node)
    ready = [node for node, n in waiting.items() if n == 0]
    while ready:
        for child in dependents[ready.pop()]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    stuck = {node: [d for d in ds if waiting[d]] for node, ds in edges.items() if waiting[node]}
    found: list[list[K]] = []
    for component in _components(stuck):
        start = component[0]
        if len(component) > 1 or start in stuck[start]:
            found.append(_path_back(start, stuck, set(component)))
    return found


def _components(edges: Mapping[K, list[K]]) -> list[list[K]]:
    """Strongly connected components (Tarjan's algorithm, iterative), members in `edges`
    order. Every edge must name a key of `edges`."""
    order = {node: i for i, node in enumerate(edges)}
    index: dict[K, int] = {}
    low: dict[K, int] = {}
    stack: list[K] = []
    on_stack: set[K] = set()
    result: list[list[K]] = []
    for root in edges:
        if root in index:
            continue
        work: list[tuple[K, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                child = edges[node][i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                result.append(sorted(members, key=order.__getitem__))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return result


def _path_back(start: K, deps: Mapping[K, list[K]], members: set[K]) -> list[K]:
    """The shortest dependency path from `start` back to itself inside one component."""
    previous: dict[K, K] = {}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for dep in deps[node]:
            if dep == start:
                path = [start]
                while node != start:
                    path.append(node)
                    node = previous[node]
                return [start, *reversed(path[1:]), start]
            if dep in members and dep not in previous:
                previous[dep] = node
                todo.append(dep)
    raise AssertionError("a component with a cycle has a path back")  # pragma: no cover
