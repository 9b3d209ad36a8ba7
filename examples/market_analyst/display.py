"""What a person watches: rich output driven by the loops' events.

`RunView` is an event sink. Tool calls print as they start and finish, stamped with
seconds since the run began, so calls that overlap (the ReWOO worker's parallel steps,
the parallel calls of one ReAct turn) are visible as overlapping times.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from agentloops import (
    Event,
    ModelCallFinished,
    PlanMade,
    Replanned,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


class RunView:
    """Prints events as they arrive and totals model usage. Thread-safe."""

    def __init__(self, console: Console):
        self.console = console
        self.started = time.perf_counter()
        self.usage = Usage()
        self.model_calls = 0
        self.calls_by_loop: dict[str, int] = {}
        self._lock = threading.Lock()

    def _t(self, event: Event) -> str:
        return f"[dim]{event.at - self.started:6.2f}s[/]"

    def __call__(self, event: Event) -> None:
        if isinstance(event, ModelCallFinished):
            with self._lock:
                self.usage = self.usage + event.usage
                self.model_calls += 1
                self.calls_by_loop[event.loop] = self.calls_by_loop.get(event.loop, 0) + 1
        elif isinstance(event, ToolCallStarted):
            self.console.print(f"{self._t(event)}   [cyan]▶[/] {event.name}({_args(event.args)})")
        elif isinstance(event, ToolCallFinished):
            outcome = event.outcome
            if outcome.is_error:
                self.console.print(
                    f"{self._t(event)}   [red]✘ {event.name}[/] after {outcome.seconds:.2f}s: "
                    f"{outcome.content[:160]}"
                )
            else:
                self.console.print(
                    f"{self._t(event)}   [green]✔[/] {event.name} in {outcome.seconds:.2f}s"
                )
        elif isinstance(event, StepStarted) and event.loop == "plan_execute":
            self.console.print(
                f"{self._t(event)} [bold]step {event.step_id}[/]: {event.description}"
            )
        elif isinstance(event, StepFinished) and event.loop == "plan_execute":
            mark = "[green]done[/]" if event.ok else "[red]failed[/]"
            self.console.print(
                f"{self._t(event)} step {event.step_id} {mark} in {event.seconds:.2f}s"
            )
        elif isinstance(event, PlanMade):
            self.console.print(plan_table(event.plan))
        elif isinstance(event, Replanned):
            problems = "; ".join(event.problems)
            self.console.print(f"[yellow]re-planning (attempt {event.attempt})[/]: {problems}")


def plan_table(plan: Any) -> Table:
    """A ReWOO plan (step ids, tools, dependencies) or a Plan-and-Execute plan."""
    steps = list(getattr(plan, "steps", []))
    if steps and hasattr(steps[0], "step_id"):
        table = Table(title="ReWOO plan (every tool call decided up front)", title_justify="left")
        for column in ("step", "tool", "arguments", "waits for"):
            table.add_column(column)
        for s in steps:
            table.add_row(
                s.step_id, s.tool_name, _args(s.tool_args), ", ".join(s.depends_on) or "-"
            )
        return table
    table = Table(title="Plan-and-Execute plan", title_justify="left")
    for column in ("#", "step", "tool hint"):
        table.add_column(column)
    for s in steps:
        table.add_row(str(s.step_number), s.description, s.tool_hint or "-")
    return table


def usage_table(usage: Usage, model_calls: int, by_loop: dict[str, int]) -> Table:
    """Tokens split the way prompt caching bills them, and the model-call count."""
    table = Table(title="Model usage", title_justify="left")
    for column in ("uncached input", "cache read", "cache write", "output", "model calls"):
        table.add_column(column, justify="right")
    calls = f"{model_calls} (" + ", ".join(f"{k} {v}" for k, v in sorted(by_loop.items())) + ")"
    table.add_row(
        f"{usage.input_tokens:,}",
        f"{usage.cache_read_tokens:,}",
        f"{usage.cache_write_tokens:,}",
        f"{usage.output_tokens:,}",
        calls if by_loop else str(model_calls),
    )
    return table


def verdict_panel(verdict: str, reasons: list[str]) -> Panel:
    style = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
    body = "\n".join(f"• {r}" for r in reasons) or "(no reasons given)"
    return Panel(body, title=f"Evaluator (fresh context): [bold]{verdict}[/]", border_style=style)
