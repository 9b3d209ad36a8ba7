"""What a person watches: rich output driven by the loops' events.

`RunView` is an event sink. Tool calls print as they start and finish, stamped with
seconds since the run began, so calls that overlap (the ReWOO worker's parallel steps,
the parallel calls of one ReAct turn) are visible as overlapping times. Model calls print
as they finish, named by their role, from the clients it watches (`RunView.watch`): the
names the usage table uses too (`roles.label`).

Requests, tickers, tool outputs and model text are data, never rich markup: they go on
screen as `Text`, so "[link=...]" or "[/]" in them shows as typed and cannot break a run.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentloops import (
    Event,
    ModelClient,
    PlanMade,
    Replanned,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from market_analyst.roles import in_order, label
from market_analyst.watch import CallFinished, Note, Watched


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def line(*parts: str | tuple[str, str]) -> Text:
    """A line from plain strings (shown as written) and (text, style) pairs."""
    return Text.assemble(*parts)


class RunView:
    """Prints events as they arrive (rich's console print is thread-safe), and the model
    calls of the clients it `watch`es."""

    def __init__(self, console: Console):
        self.console = console
        self.started = time.perf_counter()
        self._ran: set[str] = set()  # ReWOO steps whose tool call was shown

    def watch(self, model: ModelClient) -> ModelClient:
        """`model`, with each call it finishes printed, named by its role."""
        return Watched(model, self._model_call)

    def _model_call(self, note: Note) -> None:
        if isinstance(note, CallFinished):
            u = note.response.usage
            self.console.print(
                line(
                    (f"{time.perf_counter() - self.started:6.2f}s ", "dim"),
                    ("◆", "magenta"),
                    f" model call ({label(note.role)}) {note.seconds:.2f}s, "
                    f"{u.total_input_tokens:,} in / {u.output_tokens:,} out",
                )
            )

    def __call__(self, event: Event) -> None:
        t = (f"{event.at - self.started:6.2f}s ", "dim")
        # A ReWOO step is one planned tool call: its call id is the step id (#E1).
        call_id = getattr(event, "call_id", "")
        step = f"{call_id} " if event.loop == "rewoo" and call_id else ""
        show = self.console.print
        if isinstance(event, ToolCallStarted):
            show(line(t, ("  ▶ ", "cyan"), f"{step}{event.name}({_args(event.args)})"))
        elif isinstance(event, ToolCallFinished):
            self._ran.add(event.call_id)
            o = event.outcome
            if o.is_error:
                text = f"{step}{event.name} after {o.seconds:.2f}s: {o.content[:160]}"
                show(line(t, ("  ✘ ", "red"), text))
            else:
                show(line(t, ("  ✔ ", "green"), f"{step}{event.name} in {o.seconds:.2f}s"))
        elif isinstance(event, StepStarted) and event.loop != "rewoo":
            show(line(t, (f"step {event.step_id}", "bold"), f": {event.description}"))
        elif isinstance(event, StepFinished) and event.loop != "rewoo":
            mark = ("✔ done", "green") if event.ok else ("✘ incomplete", "red")
            show(line(t, f"  step {event.step_id} ", mark, f" in {event.seconds:.2f}s"))
        elif isinstance(event, StepFinished) and event.step_id not in self._ran:
            show(line(t, ("  - ", "yellow"), f"{event.step_id} not run: {event.summary[:160]}"))
        elif isinstance(event, PlanMade):
            show(plan_table(event.plan))
        elif isinstance(event, Replanned):
            what = "; ".join(event.problems) or "(no reason given)"
            show(line((f"re-planning (revision {event.attempt})", "yellow"), f": {what}"))


def plan_table(plan: Any) -> Table:
    """A ReWOO plan (step ids, tools, dependencies) or a Plan-and-Execute plan."""
    steps = list(getattr(plan, "steps", []))
    if steps and hasattr(steps[0], "step_id"):
        table = Table(title="ReWOO plan (every tool call decided up front)", title_justify="left")
        for column in ("step", "tool", "arguments", "waits for"):
            table.add_column(column)
        for s in steps:
            cells = (s.step_id, s.tool_name, _args(s.tool_args), ", ".join(s.depends_on) or "-")
            table.add_row(*map(Text, cells))
        return table
    table = Table(title="Plan-and-Execute plan", title_justify="left")
    for column in ("#", "step", "tool hint"):
        table.add_column(column)
    for s in steps:
        table.add_row(*map(Text, (str(s.step_number), s.description, s.tool_hint or "-")))
    return table


def usage_table(usage: Usage, calls_by_role: dict[str, int]) -> Group:
    """Tokens split the way prompt caching bills them, then a line of the model calls by
    role, in the order the graph makes them (a line: a caption would wrap at the table's
    width)."""
    roles = ", ".join(f"{label(r)} {calls_by_role[r]}" for r in in_order(calls_by_role))
    table = Table(title="Model usage", title_justify="left")
    for column in ("uncached input", "cache read", "cache write", "output", "model calls"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{usage.input_tokens:,}",
        f"{usage.cache_read_tokens:,}",
        f"{usage.cache_write_tokens:,}",
        f"{usage.output_tokens:,}",
        str(sum(calls_by_role.values())),
    )
    return Group(table, Text(f"by role: {roles}"))


def verdict_panel(verdict: str, reasons: list[str]) -> Panel:
    style = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
    body = Text("\n".join(f"• {r}" for r in reasons) or "(no reasons given)")
    title = line("Evaluator (fresh context): ", (verdict, "bold"))
    return Panel(body, title=title, border_style=style)
