"""Run several loops side by side on the same tasks and measure what each one costs.

A loop enters as a factory that takes the event sink the harness installs and returns
anything with `.run(task)`, so ReAct, ReWOO, Plan-and-Execute and your own runner are
measured the same way: results give the answer, usage and model calls; events give the
tool calls and tool errors. Every started attempt is counted, including those that raised.

Rule: a kit; it knows events and usage, and takes loops as factories (it imports no loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from agentloops.comparison._report import draw_chart, markdown_table, write_csv
from agentloops.comparison.records import Attempt, LoopSummary

__all__ = [
    "Attempt",
    "Comparison",
    "Judge",
    "LoopFactory",
    "LoopSummary",
    "RunResult",
    "Runner",
    "compare",
]
from agentloops.errors import ConfigurationError
from agentloops.events import Event, EventSink, ModelCallFinished, ToolCallFinished
from agentloops.usage import Usage


class RunResult(Protocol):
    """What `compare` reads from a run's result (`ReActResult`, `ReWOOResult`, ...)."""

    @property
    def answer(self) -> str: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def model_calls(self) -> int: ...


class Runner(Protocol):
    """Anything with `.run(task)`: `ReActLoop`, `ReWOOPipeline`, `PlanAndExecute`, yours."""

    def run(self, task: str) -> RunResult: ...


LoopFactory = Callable[[EventSink], Runner]
"""Builds a fresh runner for one attempt, wired to the sink it is given (`on_event=`)."""


class Judge(Protocol):
    """An `Evaluator`, or anything whose `.evaluate(...)` returns an object with `.verdict`."""

    def evaluate(self, task: str, draft: str, evidence: Any = None) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Every attempt of a `compare` run, and the tables and chart made from them."""

    loops: tuple[str, ...]
    tasks: tuple[str, ...]
    trials: int
    attempts: tuple[Attempt, ...]
    """In start order: trial by trial, then task by task, then loop by loop."""
    seconds: float
    """Wall time of the whole comparison."""

    def summary(self, loop: str) -> LoopSummary:
        """Totals for one loop."""
        if loop not in self.loops:
            raise ConfigurationError(f"no loop named {loop!r}; loops: {list(self.loops)}")
        mine = [a for a in self.attempts if a.loop == loop]
        return LoopSummary(
            loop=loop,
            attempts=len(mine),
            successes=sum(a.success for a in mine),
            errors=sum(bool(a.error) for a in mine),
            rejected=sum(a.judged and not a.success for a in mine),
            incorrect_acceptances=sum(a.incorrect_acceptance for a in mine),
            model_calls=sum(a.model_calls for a in mine),
            usage=sum((a.usage for a in mine), Usage()),
            tool_calls=sum(a.tool_calls for a in mine),
            tool_errors=sum(a.tool_errors for a in mine),
            attempts_with_tool_errors=sum(a.tool_errors > 0 for a in mine),
            recoveries=sum(a.recovered for a in mine),
            seconds=sum(a.seconds for a in mine),
            cost=_total([a.cost for a in mine]),
            cost_by_role=_by_role(a.cost_by_role for a in mine),
        )

    def summaries(self) -> list[LoopSummary]:
        """One summary per loop, in the order the loops were given."""
        return [self.summary(name) for name in self.loops]

    def table(self) -> str:
        """A markdown table, one row per loop: rates as counts, costs as means per attempt."""
        return markdown_table(self.summaries(), len(self.tasks), self.trials)

    def to_csv(self, path: str | Path) -> Path:
        """Write one row per loop with its `LoopSummary` totals and rates, tokens by kind."""
        return write_csv(self.summaries(), Path(path))

    def chart(self, path: str | Path) -> Path:
        """Save a PNG: success, model calls, tokens by kind and seconds per attempt, per loop.

        Needs matplotlib (`pip install 'agentloops-kit[chart]'`); draws without a display.

        Raises:
            ImportError: matplotlib is not installed.
        """
        return draw_chart(self.summaries(), len(self.tasks), self.trials, Path(path))


def compare(
    loops: Mapping[str, LoopFactory],
    tasks: Sequence[str],
    *,
    checker: Callable[[str, str], bool],
    trials: int = 1,
    evaluator: Judge | None = None,
    max_workers: int = 1,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> Comparison:
    """Run every loop on every task `trials` times and measure each attempt.

    Args:
        loops: a name and a factory per contender, e.g.
            `{"react": lambda on_event: ReActLoop(model, tools, on_event=on_event)}`.
            The factory is called once per attempt; give every loop the same tools and
            limits so the numbers compare. It must pass the sink on as `on_event`:
            tool calls and tool errors are counted from `ToolCallFinished` events.
        tasks: the task texts; every loop runs every task.
        checker: `checker(task, answer) -> bool`, the ground truth for success.
        trials: how many times each loop runs each task.
        evaluator: when given, judges every answer with `evaluate(task, answer, evidence=...)`
            (the evidence is the run's tool outputs as text). A pass on an answer the
            checker rejects is an incorrect acceptance. Its tokens are not charged to the loop.
        max_workers: attempts run at once (threads); factories must then be thread-safe.
        on_attempt: called with each `Attempt` as it finishes (in finishing order, from
            the calling thread), to show progress on a long comparison.

    Returns:
        A `Comparison` holding every started attempt: a run that raised is a failure
        with its error, and the model calls and tokens it had spent still count.

    Raises:
        ConfigurationError: no loops or tasks, `trials` or `max_workers` below 1, or a
            runner that made model calls without sending an event to its sink.
    """
    if not loops or not tasks:
        raise ConfigurationError(f"need loops and tasks, got {len(loops)} and {len(tasks)}")
    if trials < 1 or max_workers < 1:
        raise ConfigurationError(
            f"trials and max_workers must be >= 1, got {trials} and {max_workers}"
        )
    jobs = [(name, task, t) for t in range(trials) for task in tasks for name in loops]

    def attempt(job: tuple[str, str, int]) -> Attempt:
        name, task, trial = job
        return _attempt(name, loops[name], task, trial, checker, evaluator)

    def report(finished: Attempt) -> Attempt:
        if on_attempt is not None:
            on_attempt(finished)
        return finished

    start = time.perf_counter()
    if max_workers == 1:
        done = [report(attempt(job)) for job in jobs]
    else:
        with ThreadPoolExecutor(max_workers, thread_name_prefix="agentloops-compare") as pool:
            futures = [pool.submit(attempt, job) for job in jobs]
            for future in as_completed(futures):
                report(future.result())
            done = [future.result() for future in futures]  # back in start order
    seconds = time.perf_counter() - start
    return Comparison(
        loops=tuple(loops), tasks=tuple(tasks), trials=trials, attempts=tuple(done), seconds=seconds
    )


def _attempt(
    name: str,
    build: LoopFactory,
    task: str,
    trial: int,
    checker: Callable[[str, str], bool],
    evaluator: Judge | None,
) -> Attempt:
    events: list[Event] = []
    sink = events.append  # thread-safe: a loop's tool calls may report from worker threads

    runner = build(sink)  # outside the try: a factory that raises is the caller's mistake
    start = time.perf_counter()
    result: RunResult | None = None
    error = ""
    try:
        result = runner.run(task)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        calls, usage = _spent(exc, events)
    seconds = time.perf_counter() - start
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    answer, stop_reason, verdict, success = "", "error", "", False
    if result is not None:
        if not events and result.model_calls:
            raise ConfigurationError(
                f"loop {name!r} sent no events: its factory must pass on_event to the loop"
            )
        calls, usage, answer = result.model_calls, result.usage, result.answer
        stop_reason = str(getattr(result, "stop_reason", "answered"))
        success = bool(checker(task, answer))
        verdict = _judge(evaluator, task, answer, finished)
    return Attempt(
        loop=name,
        task=task,
        trial=trial,
        answer=answer,
        success=success,
        stop_reason=stop_reason,
        error=error,
        verdict=verdict,
        model_calls=calls,
        usage=usage,
        tool_calls=len(finished),
        tool_errors=sum(e.outcome.is_error for e in finished),
        seconds=seconds,
        **_costs(events),
    )


def _spent(exc: Exception, events: list[Event]) -> tuple[int, Usage]:
    """Model calls and tokens of a run that raised: its partial result's, else its events'."""
    partial = getattr(exc, "result", None)
    usage, calls = getattr(partial, "usage", None), getattr(partial, "model_calls", None)
    if isinstance(usage, Usage) and isinstance(calls, int):
        return calls, usage
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    return len(finished), sum((e.usage for e in finished), Usage())


def _costs(events: list[Event]) -> dict[str, Any]:
    """An attempt's cost, from its model calls' events: known when every call's is."""
    calls = [e for e in events if isinstance(e, ModelCallFinished)]
    priced = [(e.role or e.loop, e.cost) for e in calls if e.cost is not None]
    if not calls or len(priced) < len(calls):
        return {}
    return {
        "cost": sum((cost for _, cost in priced), Decimal(0)),
        "cost_by_role": _by_role({role: cost} for role, cost in priced),
    }


def _total(costs: Sequence[Decimal | None]) -> Decimal | None:
    if not costs or any(c is None for c in costs):
        return None
    return sum((c for c in costs if c is not None), Decimal(0))


def _by_role(parts: Iterable[Mapping[str, Decimal]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for part in parts:
        for role, cost in part.items():
            total[role] = total.get(role, Decimal(0)) + cost
    return total


def _judge(
    evaluator: Judge | None, task: str, answer: str, finished: list[ToolCallFinished]
) -> str:
    if evaluator is None:
        return ""
    evidence = "\n".join(
        f"{e.name}{' (error)' if e.outcome.is_error else ''}: {e.outcome.content}" for e in finished
    )
    try:
        return str(evaluator.evaluate(task, answer, evidence=evidence).verdict)
    except Exception as exc:  # a judge that fails must not lose the attempt it was judging
        return f"error: {type(exc).__name__}: {exc}"
