"""What the page is sent about a run: the loops' events and the analyst's stages, as small
JSON-ready dicts, each stamped `t`, seconds since the run started in this server.

A tool call is two items (`tool` with `phase` "start", then "end") sharing a `key`, so
the page can draw each call from its start to its finish on one time line and calls
that overlap show as overlapping bars. A model call is a `thinking` item when it starts
(naming its role), `text` items with what it writes as it streams, gathered into pieces
(`text` then `flush`), and a `model` item with its usage when it is done. Everything a
model or a person wrote travels as plain strings; the page puts them on screen as text.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from agentloops import (
    Event,
    ModelCallFinished,
    PlanMade,
    Replanned,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from market_analyst.roles import label
from market_analyst.watch import CallText

Item = dict[str, Any]

_PREVIEW = 240  # characters of a tool's output shown on the time line


class Feed:
    """Turns one run's events into items. Not thread-safe: call it from one thread."""

    def __init__(self, started: float | None = None):
        self.started = time.perf_counter() if started is None else started
        self._step = ""  # the Plan-and-Execute step whose tool calls are arriving
        self._text: list[str] = []  # streamed text not yet sent, all of one role and part
        self._text_of: tuple[str, str] = ("", "")

    def since(self, at: float | None = None) -> float:
        """Seconds from the run's start to `at` (a `perf_counter` reading; default now)."""
        return round((time.perf_counter() if at is None else at) - self.started, 4)

    def event(self, event: Event) -> Item | None:
        """The item for a loop event, or None for events the page does not show."""
        t = self.since(event.at)
        if isinstance(event, ToolCallStarted | ToolCallFinished):
            item: Item = {
                "kind": "tool",
                "t": t,
                "key": f"{event.run_id}/{event.call_id}",
                "call_id": event.call_id,
                "name": event.name,
                "step": self._step if event.loop != "rewoo" else "",
            }
            if isinstance(event, ToolCallStarted):
                return {**item, "phase": "start", "args": event.args}
            outcome = event.outcome
            return {
                **item,
                "phase": "end",
                "error": outcome.is_error,
                "seconds": round(outcome.seconds, 4),
                "preview": outcome.content[:_PREVIEW],
            }
        if isinstance(event, ModelCallFinished):
            return {
                "kind": "model",
                "t": t,
                "loop": event.loop,
                "seconds": round(event.seconds, 4),
                "usage": dataclasses.asdict(event.usage),
            }
        if isinstance(event, PlanMade):
            return {"kind": "plan", "t": t, "loop": event.loop, "steps": plan_steps(event.plan)}
        if isinstance(event, StepStarted | StepFinished) and event.loop == "plan_execute":
            return self._step_item(event, t)
        if isinstance(event, Replanned):
            return {"kind": "replan", "t": t, "attempt": event.attempt, "notes": event.problems}
        return None

    def _step_item(self, event: StepStarted | StepFinished, t: float) -> Item:
        if isinstance(event, StepStarted):
            self._step = event.step_id
            return {
                "kind": "step",
                "t": t,
                "phase": "start",
                "id": event.step_id,
                "description": event.description,
            }
        self._step = ""
        return {"kind": "step", "t": t, "phase": "end", "id": event.step_id, "ok": event.ok}

    def thinking(self, role: str) -> Item:
        """A model call started: the page shows who is thinking until its `model` item."""
        return {"kind": "thinking", "t": self.since(), "role": label(role)}

    def text(self, piece: CallText) -> Item | None:
        """Gathers a piece of streamed text; returns what was gathered before it when the
        piece is another role's or another part ("text", "thinking", "tool_call")."""
        of = (label(piece.role), piece.part)
        done = self.flush() if self._text and of != self._text_of else None
        self._text_of = of
        self._text.append(piece.text)
        return done

    def flush(self) -> Item | None:
        """The text gathered so far as one item, or None if there is none."""
        if not self._text:
            return None
        role, part = self._text_of
        text, self._text = "".join(self._text), []
        return {"kind": "text", "t": self.since(), "role": role, "part": part, "text": text}

    def stage(self, stage: str, record: dict[str, Any], **extra: Any) -> Item:
        """An item for one of the analyst's stages ("route", "draft", "verdict")."""
        fields = {
            "route": ("route", "route_reasoning"),
            "draft": ("draft", "figure_problems"),
            "verdict": ("verdict",),
        }[stage]
        shown = {k: record[k] for k in fields if k in record}
        return {"kind": "stage", "t": self.since(), "stage": stage, **shown, **extra}

    def end(self, status: str, error: str | None = None) -> Item:
        """The last item of a run's feed: where the run stands now."""
        return {"kind": "end", "t": self.since(), "status": status, "error": error}


def plan_steps(plan: Any) -> list[Item]:
    """A ReWOO plan's or a Plan-and-Execute plan's steps, for a table."""
    out: list[Item] = []
    for s in getattr(plan, "steps", []):
        if hasattr(s, "step_id"):  # ReWOO: every tool call decided up front
            out.append(
                {
                    "id": s.step_id,
                    "tool": s.tool_name,
                    "args": s.tool_args,
                    "after": list(s.depends_on),
                    "description": s.description,
                }
            )
        else:
            out.append(
                {
                    "id": str(s.step_number),
                    "tool": s.tool_hint or "",
                    "description": s.description,
                }
            )
    return out
