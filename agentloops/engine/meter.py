"""A run's money and time, metered once for every loop: what its model calls cost (in all,
and per role), the cap on that cost, and the run's wall-clock deadline.

`metered(machine, meter)` wraps a run's step machine where a driver starts it, so it sees
every model call of the run, a Plan-and-Execute step's calls included (a step is a nested
machine). Before each model call it stops the run with `"budget"` once `max_cost` is
spent, or with `"deadline"` once the deadline passed, and otherwise hands the call what is
left of the deadline as its timeout (a call cut short by it stops the run the same way).
Tool calls that started run to their end (each tool has its own `timeout=`), so the
transcript a stopped run returns is always whole. After each reply it adds its cost. A
stop is thrown into the machine as `Stop`: every loop's `lifecycle` turns it into the
loop's partial result with that stop reason, and this wrapper returns that result instead
of raising.

Rule: it knows no loop: only `CallModel` effects (alone, or alongside a guard's check), their
replies, and the `Stop` it throws.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agentloops.engine.effects import CallModel, CheckGuard, Machine, R
from agentloops.engine.runs import Stop
from agentloops.errors import ConfigurationError, ModelError
from agentloops.usage import Amount, Price, Usage, as_money

if TYPE_CHECKING:
    from agentloops.pricing import Pricer

__all__ = ["Meter", "meter_for", "metered"]


class Meter:
    """One run's cost so far and its limits.

    Args:
        pricer: prices each reply (`agentloops.pricing.pricer`); `None`: cost unknown.
        max_cost: stop before a model call once the cost reached this (needs `pricer`).
        deadline: seconds the run may take, from when the meter is made.
        clock: `time.monotonic` (tests pass a fake).
    """

    def __init__(
        self,
        *,
        pricer: Pricer | None,
        max_cost: Decimal | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.pricer = pricer
        self.max_cost = max_cost
        self.deadline = deadline
        self.clock = clock
        self.ends = None if deadline is None else clock() + deadline
        self.cost = Decimal(0)
        self.by_role: dict[str, Decimal] = {}

    def left(self) -> float | None:
        """Seconds before the deadline (`None`: no deadline)."""
        return None if self.ends is None else self.ends - self.clock()

    def stop_before_call(self) -> Stop | None:
        """Why the next model call must not start, if it must not."""
        if self.max_cost is not None and self.cost >= self.max_cost:
            return Stop("budget", f"max_cost={self.max_cost} reached after {self.cost} spent")
        return self.stop_at_deadline()

    def stop_at_deadline(self) -> Stop | None:
        left = self.left()
        if left is not None and left <= 0:
            return Stop("deadline", f"deadline={self.deadline:g}s passed")
        return None

    def charge(self, effect: CallModel, price: Price | None, usage: Usage) -> None:
        if price is None:
            return
        cost = usage.cost(price)
        self.cost += cost
        role = effect.role or effect.loop
        self.by_role[role] = self.by_role.get(role, Decimal(0)) + cost


def metered(machine: Machine[R], meter: Meter) -> Machine[R]:
    """`machine`, its model calls metered and limited by `meter` (see the module doc);
    closing this closes `machine` too."""
    try:
        return (yield from _metered(machine, meter))
    finally:
        machine.close()


def _metered(machine: Machine[R], meter: Meter) -> Machine[R]:
    pricer = meter.pricer
    outcome: Any = None
    error: Exception | None = None
    stop: Stop | None = None
    while True:
        try:
            effect = machine.send(outcome) if error is None else machine.throw(error)
        except StopIteration as done:
            result: R = done.value
            return _priced(result, meter)
        except Stop as stopped:
            partial: R = stopped.result
            if stopped is not stop:  # another wrapper's (a tree's budget): priced for it
                stopped.result = _priced(partial, meter)
                raise
            return _priced(partial, meter)
        outcome, error = None, None
        kind = type(effect)
        guarded = kind is CheckGuard and effect.call is not None  # type: ignore[union-attr]
        if kind is CallModel or guarded:
            stop = meter.stop_before_call()
            if stop is not None:
                error = stop
                continue
            call: CallModel = effect.call if guarded else effect  # type: ignore[union-attr,assignment]
            left = meter.left()
            if left is not None:  # the call gets what is left of the run's time
                request = dataclasses.replace(call.request, timeout=left)
                call = dataclasses.replace(call, request=request, pricer=pricer)
            elif pricer is not None:
                call = dataclasses.replace(call, pricer=pricer)
            # a guard's check alongside the call: the same guard, with the metered call
            effect = dataclasses.replace(effect, call=call) if guarded else call  # type: ignore[arg-type]
            try:
                outcome = yield effect
            except ModelError as exc:  # a call cut short by the deadline: the run's stop
                stop = meter.stop_at_deadline()
                error = stop or exc
                continue
            except Exception as exc:  # the machine decides (a driver's, or a tool's)
                error = exc
                continue
            if pricer is not None:
                meter.charge(call, pricer(outcome), outcome.usage)
            continue
        try:
            outcome = yield effect
        except Exception as exc:
            error = exc


def _priced(result: R, meter: Meter) -> R:
    """The run's result with what it cost (when every reply was priced)."""
    if meter.pricer is None or not hasattr(result, "cost"):
        return result
    priced: R = dataclasses.replace(  # type: ignore[type-var]
        result, cost=meter.cost, cost_by_role=dict(meter.by_role)
    )
    return priced


def meter_for(
    clients: Iterable[object],
    *,
    price: Price | Mapping[str, Price] | None,
    max_cost: Amount | None,
    deadline: float | None,
) -> Callable[[], Meter] | None:
    """How a loop over `clients` meters each run, checked once, when the loop is built.

    The replies are priced by `price` (one `Price`, or one per model name, on top of the
    clients' own prices and the table), else by the clients' own prices when all are
    known; then each run reports its cost. `None`: nothing to meter (no price known, no
    cap, no deadline), so runs are driven as they are.

    Raises:
        ConfigurationError: `max_cost` without a known price for every model that may
            answer (a cap that might not see a call's cost is refused), a `max_cost`
            that is not an amount >= 0, or a `deadline` that is not > 0 seconds.
    """
    from agentloops import pricing  # with the first loop that prices or limits its runs

    cap = None
    if max_cost is not None:
        try:
            cap = as_money("max_cost", max_cost)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
    if deadline is not None and not deadline > 0:
        raise ConfigurationError(f"deadline must be > 0 seconds, got {deadline}")
    priced: Pricer | None
    if isinstance(price, Price):
        priced = pricing.pricer(None, price)
    else:
        table: dict[str, Price | None] = {}
        for client in clients:
            table.update(pricing.prices_of(client))
        table.update(price or {})
        try:
            priced = pricing.pricer(None, table)
        except ConfigurationError:
            if cap is not None:
                raise
            priced = None  # the cost is unknown: runs report none
    if priced is None and deadline is None:
        return None
    return _Spec(priced, cap, deadline)


class _Spec:
    """Makes each run's `Meter` (a plain class, so a loop holding it pickles)."""

    __slots__ = ("deadline", "max_cost", "pricer")

    def __init__(self, pricer: Pricer | None, max_cost: Decimal | None, deadline: float | None):
        self.pricer, self.max_cost, self.deadline = pricer, max_cost, deadline

    def __call__(self) -> Meter:
        return Meter(pricer=self.pricer, max_cost=self.max_cost, deadline=self.deadline)
