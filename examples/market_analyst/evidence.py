"""The evidence: every tool call of a run with its output, in a stable order.

The writer cites tool outputs by position (E1, E2, ...) and the evaluator checks the
draft against them, so the order must not depend on which parallel call finished first.
Deep research's evidence is read from its journal, which holds every call that finished,
in every process that worked on the run (a resumed run's replayed calls send no events).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentloops import ToolOutcome
from agentloops.journal import JournalRecord
from market_analyst.tools import RESEARCH_TOOLS

_TOOL_ORDER = {t.name: i for i, t in enumerate(RESEARCH_TOOLS)}


def item(name: str, args: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
    """One piece of evidence, as saved in the run's record."""
    return {"name": name, "args": args, "is_error": outcome.is_error, "content": outcome.content}


def _order(e: dict[str, Any]) -> tuple[int, str]:
    return _TOOL_ORDER.get(e["name"], len(_TOOL_ORDER)), json.dumps(e["args"], sort_keys=True)


def from_journal(records: Sequence[JournalRecord]) -> list[dict[str, Any]]:
    """The finished tool calls of a research journal: step by step (a step being the loop
    whose model turn asked for them), and within a step sorted by tool, then arguments."""
    steps: dict[str, list[dict[str, Any]]] = {}
    asked: dict[str, tuple[str, dict[str, Any]]] = {}  # call key -> (step, args)
    step = ""
    for r in records:
        if r.kind == "model":
            step = str(r.data.get("run", ""))
        elif r.kind == "tool_started" and r.key is not None:
            asked[r.key] = (step, r.data["args"])
        elif r.kind == "tool_finished" and r.key in asked:
            where, args = asked[r.key]
            outcome = r.data["outcome"]
            done = ToolOutcome(content=outcome["content"], is_error=outcome["is_error"])
            steps.setdefault(where, []).append(item(r.data["name"], args, done))
    return [e for calls in steps.values() for e in sorted(calls, key=_order)]
