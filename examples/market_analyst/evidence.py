"""The evidence: every tool call of a research run with its output and its id, in a stable
order, read from the run's journal.

The research loop's final answer cites the evidence by id, and the figure check and the
evaluator check the draft against it, so the ids must be what the answering model saw and
the order must not depend on which parallel call finished first. A flash briefing's ids are
its ReWOO steps' ("#E3" is "E3", as the solver saw it); deep research's are per step ("S2.1"
is step 2's first tool output, and the reporter, who sees the steps, cites "S2"). The journal
holds every call that finished, in every process that worked on the run (a resumed run's
replayed calls send no events), and it is read while the run goes on too: the loop's output
validator checks the answer against it before the run ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentloops import ToolOutcome
from agentloops.journal import JournalRecord
from market_analyst.tools import RESEARCH_TOOLS

_TOOL_ORDER = {t.name: i for i, t in enumerate(RESEARCH_TOOLS)}
_REWOO_STEP = re.compile(r"#E(\d+)")
_STEP_RUN = re.compile(r"\.(\d+)$")


def item(name: str, args: dict[str, Any], outcome: ToolOutcome, id: str = "") -> dict[str, Any]:
    """One piece of evidence, as saved in the run's record."""
    found = {"name": name, "args": args, "is_error": outcome.is_error, "content": outcome.content}
    return {"id": id, **found} if id else found


def _order(e: dict[str, Any]) -> tuple[int, str]:
    return _TOOL_ORDER.get(e["name"], len(_TOOL_ORDER)), json.dumps(e["args"], sort_keys=True)


def from_journal(records: Sequence[JournalRecord]) -> list[dict[str, Any]]:
    """The finished tool calls of a research journal, each with its id: a ReWOO step's in
    plan order, or step by step (a step being the loop whose model turn asked for them),
    within a step sorted by tool, then arguments."""
    planned: dict[int, dict[str, Any]] = {}
    steps: dict[str, list[dict[str, Any]]] = {}
    asked: dict[str, tuple[str, str, dict[str, Any]]] = {}  # call key -> (call id, step, args)
    step = ""
    for r in records:
        if r.kind == "model":
            step = str(r.data.get("run", ""))
        elif r.kind == "tool_started" and r.key is not None:
            asked[r.key] = (str(r.data.get("id", "")), step, r.data["args"])
        elif r.kind == "tool_finished" and r.key in asked:
            call_id, where, args = asked[r.key]
            outcome = r.data["outcome"]
            done = ToolOutcome(content=outcome["content"], is_error=outcome["is_error"])
            rewoo = _REWOO_STEP.fullmatch(call_id)
            if rewoo:  # a flash briefing: the plan's step is the id
                n = int(rewoo.group(1))
                planned[n] = item(r.data["name"], args, done, f"E{n}")
            else:
                steps.setdefault(where, []).append(item(r.data["name"], args, done))
    found = [planned[n] for n in sorted(planned)]
    for where, calls in steps.items():
        number = _STEP_RUN.search(where)
        prefix = f"S{number.group(1)}" if number else "S"
        for k, e in enumerate(sorted(calls, key=_order), 1):
            found.append({"id": f"{prefix}.{k}", **e})
    return found
