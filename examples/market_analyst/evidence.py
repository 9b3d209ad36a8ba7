"""The evidence: every tool call of a run with its output, in a stable order.

The writer cites tool outputs by position (E1, E2, ...) and the evaluator checks the
draft against them, so the order must not depend on which parallel call finished first.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from agentloops import Event, StepFinished, ToolCallFinished, ToolCallStarted, ToolOutcome
from market_analyst.tools import RESEARCH_TOOLS

_TOOL_ORDER = {t.name: i for i, t in enumerate(RESEARCH_TOOLS)}


def item(name: str, args: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
    """One piece of evidence, as saved in the run's record."""
    return {"name": name, "args": args, "is_error": outcome.is_error, "content": outcome.content}


def _order(e: dict[str, Any]) -> tuple[int, str]:
    return _TOOL_ORDER.get(e["name"], len(_TOOL_ORDER)), json.dumps(e["args"], sort_keys=True)


class StepEvidence:
    """An event sink for Plan-and-Execute: collects each step's tool calls and, when the
    step finishes, adds them (sorted by tool, then arguments) and calls `save`.

    A step that fails part-way adds nothing: it runs again on resume, calls and all.
    """

    def __init__(self, earlier: list[dict[str, Any]], save: Callable[[list[dict[str, Any]]], None]):
        self.items = list(earlier)
        self._save = save
        self._args: dict[str, dict[str, Any]] = {}
        self._step: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            with self._lock:
                self._args[event.call_id] = event.args
        elif isinstance(event, ToolCallFinished):
            with self._lock:
                args = self._args.get(event.call_id, {})
                self._step.append(item(event.name, args, event.outcome))
        elif isinstance(event, StepFinished) and event.loop == "plan_execute":
            with self._lock:
                self.items += sorted(self._step, key=_order)
                self._step = []
                items = list(self.items)
            self._save(items)
