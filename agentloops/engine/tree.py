"""A tree of runs: a run, and the sub-runs its agent tools and handoffs make (each a run of
its own, driven by the same driver). What the tree shares: how deep each run is, the
budgets every run sets for the runs below it (tokens, tool calls, money, time), and what
the tree has spent so far, counted live across the threads and tasks its sub-runs run on.

`tracked(machine, node)` wraps a run's machine inside the durable wrapper (so replayed
calls count, as the meter's do). Before each model call it stops the run with "budget"
once the whole tree below an ancestor (or below this run, for its `max_cost`) has spent
that ancestor's limit; after each reply, and after each tool call, it counts what was
spent into the node, a finished sub-run's totals included (the sub-run's live count is
dropped then, so nothing counts twice). Each run's own limits stay its machine's and its
meter's affair; a sub-run's deadline is the nearest of its own and its ancestors'
(`Node.left`, given to its meter).

Rule: it knows effects, outcomes and `Stop`, and no loop, driver or store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agentloops.engine.effects import CallModel, CheckGuard, Machine, NextTool, R
from agentloops.engine.runs import Stop
from agentloops.messages import ToolOutcome
from agentloops.model import ModelResponse
from agentloops.usage import Price, Usage

if TYPE_CHECKING:
    from agentloops.pricing import Pricer

__all__ = ["Limits", "Node", "tracked"]

DEFAULT_MAX_DEPTH = 5
"""How deep sub-runs may nest below a run unless its loop says otherwise (`max_depth=`)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one loop bounds the runs below it by (its own runs' limits stay its own)."""

    max_total_tokens: int | None = None
    max_tool_calls: int | None = None
    max_cost: Decimal | None = None
    max_depth: int = DEFAULT_MAX_DEPTH
    deadline: float | None = None
    """Seconds, from when the run starts."""
    pricer: Pricer | None = None
    """Prices the replies of runs below that cannot price their own (a sub-loop without
    known prices, under a run with `max_cost`)."""
    owner: int = 0
    """Which loop this is (`id(loop)`): a handoff to a loop already in the chain is a cycle."""


class Node:
    """One run of a tree: its place (depth, name, the loops of its chain of handoffs), its
    limits, what it spent (its own calls, and its finished sub-runs'), and the sub-runs
    running under it now. Thread-safe: one lock per tree."""

    __slots__ = (
        "chain",
        "children_cost",
        "cost",
        "depth",
        "ends",
        "limit",
        "limits",
        "live",
        "lock",
        "name",
        "parent",
        "priced",
        "pricer",
        "run_id",
        "tokens",
        "tool_calls",
    )

    def __init__(
        self,
        limits: Limits,
        run_id: str = "",
        *,
        parent: Node | None = None,
        name: str = "",
        handoff: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limits = limits
        self.run_id = run_id
        self.parent = parent
        self.name = name
        self.lock: threading.Lock = parent.lock if parent is not None else threading.Lock()
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.limit = self.depth + limits.max_depth
        ends: float | None = None if limits.deadline is None else clock() + limits.deadline
        self.pricer = limits.pricer
        self.chain: tuple[int, ...] = (limits.owner,)
        if parent is not None:
            self.limit = min(self.limit, parent.limit)
            if parent.ends is not None:
                ends = parent.ends if ends is None else min(ends, parent.ends)
            self.pricer = self.pricer or parent.pricer
            if handoff:
                self.chain = (*parent.chain, limits.owner)
        self.ends: float | None = ends
        self.tokens = 0
        self.tool_calls = 0
        self.cost = Decimal(0)
        self.children_cost: dict[str, Decimal] = {}
        self.priced = True
        self.live: list[Node] = []

    # -- the tree's shape --------------------------------------------------------------

    def child(self, limits: Limits, run_id: str, name: str, *, handoff: bool = False) -> Node:
        """A sub-run starting under this run, counted live until it settles (the call that
        makes it counts as one of this run's tool calls from now)."""
        node = Node(limits, run_id, parent=self, name=name, handoff=handoff)
        with self.lock:
            self.live.append(node)
            self.tool_calls += 1
        return node

    def names(self) -> str:
        """This run's place in the tree, as the tools that made it: "top > researcher"."""
        parts = []
        node: Node | None = self
        while node is not None:
            parts.append(node.name or node.run_id or "the run")
            node = node.parent
        return " > ".join(reversed(parts))

    def too_deep(self) -> str | None:
        """Why a sub-run may not start under this run, if it may not."""
        if self.depth + 1 <= self.limit:
            return None
        return (
            f"a sub-run here would be {self.depth + 1} levels deep, past max_depth="
            f"{self.limit} (at {self.names()})"
        )

    def left(self, clock: Callable[[], float] = time.monotonic) -> float | None:
        """Seconds before the nearest deadline of this run and its ancestors."""
        return None if self.ends is None else self.ends - clock()

    # -- what the tree spent -----------------------------------------------------------

    def spend(self, usage: Usage, price: Price | None) -> None:
        """Count one model call of this run."""
        with self.lock:
            self.tokens += usage.total_tokens
            if price is None:
                self.priced = False
            else:
                self.cost += usage.cost(price)

    def counted(self, outcome: ToolOutcome) -> None:
        """Count one tool call of this run, and a sub-run's totals when it was one."""
        run = outcome.run
        with self.lock:
            if run is None:
                self.tool_calls += 1
                return
            live = [n for n in self.live if n.run_id != run.run_id]
            if len(live) == len(self.live):  # replayed, or refused: not counted when made
                self.tool_calls += 1
            self.live = live
            self.tokens += run.usage.total_tokens
            self.tool_calls += run.tool_calls
            if run.cost is None:
                self.priced = False
            else:
                self.cost += run.cost
                self.children_cost[run.name] = self.children_cost.get(run.name, 0) + run.cost

    def detach(self) -> None:
        """This sub-run ended without an outcome (it failed): stop counting it live, and
        its call as one of its parent's."""
        parent = self.parent
        if parent is not None:
            with self.lock:
                if self in parent.live:
                    parent.live = [n for n in parent.live if n is not self]
                    parent.tool_calls -= 1

    def totals(self) -> tuple[int, int, Decimal | None]:
        """Tokens, tool calls and cost (`None`: not every call was priced) of this run and
        every run below it, the running ones included."""
        with self.lock:
            tokens, calls, cost, priced = self._sum()
        return tokens, calls, cost if priced else None

    def _sum(self) -> tuple[int, int, Decimal, bool]:
        tokens, calls, cost, priced = self.tokens, self.tool_calls, self.cost, self.priced
        for node in self.live:
            t, c, m, p = node._sum()
            tokens, calls, cost, priced = tokens + t, calls + c, cost + m, priced and p
        return tokens, calls, cost, priced

    def exhausted(self) -> Stop | None:
        """Why this run must not make its next model call: this run's `max_cost` spent by
        it and its sub-runs together, or an ancestor's limit spent by the tree below it."""
        with self.lock:
            cap = self.limits.max_cost
            if cap is not None:
                _, _, cost, _ = self._sum()
                if cost >= cap:
                    return Stop("budget", f"max_cost={cap} reached after {cost} spent")
            node = self.parent
            while node is not None:
                why = node._spent()
                if why is not None:
                    return Stop("budget", f"{why}, by its sub-runs (this one: {self.names()})")
                node = node.parent
        return None

    def _spent(self) -> str | None:
        limits = self.limits
        if (limits.max_total_tokens, limits.max_tool_calls, limits.max_cost) == (None, None, None):
            return None
        tokens, calls, cost, _ = self._sum()
        where = f"run {self.run_id!r}" if self.run_id else "the top run"
        if limits.max_total_tokens is not None and tokens >= limits.max_total_tokens:
            return f"max_total_tokens={limits.max_total_tokens} of {where} reached after {tokens}"
        if limits.max_tool_calls is not None and calls >= limits.max_tool_calls:
            return f"max_tool_calls={limits.max_tool_calls} of {where} reached after {calls}"
        if limits.max_cost is not None and cost >= limits.max_cost:
            return f"max_cost={limits.max_cost} of {where} reached after {cost} spent"
        return None

    def finish(self, result: R) -> R:
        """The run's result with its sub-runs' cost added (to `cost`, and to `cost_by_role`
        under each agent tool's name), when the run's own cost is known."""
        if not self.children_cost or getattr(result, "cost", None) is None:
            return result
        import dataclasses

        by_role = dict(result.cost_by_role)  # type: ignore[attr-defined]
        for name, cost in self.children_cost.items():
            by_role[name] = by_role.get(name, 0) + cost
        extra = sum(self.children_cost.values(), Decimal(0))
        cost = result.cost + extra  # type: ignore[attr-defined]
        finished: R = dataclasses.replace(result, cost=cost, cost_by_role=by_role)  # type: ignore[type-var]
        return finished


def tracked(machine: Machine[R], node: Node) -> Machine[R]:
    """`machine`, counted into `node` and stopped by the tree's budgets (see the module
    doc); closing this closes `machine` too."""
    try:
        return (yield from _tracked(machine, node))
    finally:
        machine.close()


def _tracked(machine: Machine[R], node: Node) -> Machine[R]:
    outcome: Any = None
    error: Exception | None = None
    stop: Stop | None = None
    while True:
        try:
            effect = machine.send(outcome) if error is None else machine.throw(error)
        except StopIteration as done:
            result: R = done.value
            return node.finish(result)
        except Stop as stopped:
            if stopped is not stop:
                raise
            partial: R = stopped.result
            return node.finish(partial)
        outcome, error = None, None
        kind = type(effect)
        call: CallModel | None = effect if kind is CallModel else None  # type: ignore[assignment]
        if kind is CheckGuard:  # a guard's check, alongside a model call or alone
            call = effect.call  # type: ignore[union-attr,assignment]
        if call is not None:
            stop = node.exhausted()
            if stop is not None:
                error = stop
                continue
        try:
            outcome = yield effect
        except Exception as exc:  # the machine decides (a driver's, or a tool's)
            error = exc
            continue
        if call is not None:
            pricer = call.pricer or node.pricer
            node.spend(outcome.usage, _price(pricer, outcome))
        elif kind is NextTool:
            node.counted(outcome[1])


def _price(pricer: Callable[[ModelResponse], Price] | None, reply: ModelResponse) -> Price | None:
    return None if pricer is None else pricer(reply)
