"""What a ReWOO run returns: `ReWOOResult`.

A public module: pickled and stored results name it. Rule: a record only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from agentloops.errors import raise_for_stop
from agentloops.events import Record
from agentloops.messages import SubRun, ToolOutcome
from agentloops.rewoo.schema import ReWOOPlan
from agentloops.usage import Usage

ReWOOStopReason = Literal[
    "answered",
    "refused",
    "max_tokens",
    "context_window",
    "empty",
    "invalid_plan",
    "tool_failed",
    "budget",
    "deadline",
    "guardrail",
    "invalid_output",
    "error",
    "running",
]


@dataclass(frozen=True, kw_only=True)
class ReWOOResult(Record):
    """What a ReWOO run produced. An error raised by a run carries one as `.result`."""

    answer: str
    """The solver's answer ("" when the run stopped before solving)."""
    plan: ReWOOPlan | None
    """The plan that ran (the last one, after re-planning); None if none was made."""
    evidence: dict[str, ToolOutcome]
    """Each step's outcome, in plan order; failed and not-run steps are `is_error`."""
    usage: Usage
    model_calls: int
    replans: int = 0
    run_id: str = ""
    stop_reason: ReWOOStopReason = "answered"
    skipped: list[str] = field(default_factory=list)
    """Steps not run because a dependency failed."""
    detail: str = ""
    cost: Decimal | None = None
    """What the run's model calls cost, when the loop knows its models' prices (`price=`,
    a priced client, or the packaged table); `None` otherwise."""
    cost_by_role: dict[str, Decimal] = field(default_factory=dict)
    """The cost per role: "planner", "solver", "reporter"..., and "react" for ReAct steps."""
    output: Any = None
    """With `output_type`: the solver's validated answer (`None` when the run stopped
    short); `answer` is then its JSON."""
    subruns: list[SubRun] = field(default_factory=list)
    """The runs its agent tools' steps made (their usage and model calls are in this
    run's), in plan order."""

    @property
    def failed_steps(self) -> list[str]:
        """Steps whose tool ran and failed (not counting the skipped ones)."""
        return [k for k, o in self.evidence.items() if o.is_error and k not in self.skipped]

    def raise_for_stop(self) -> None:
        """Raise the matching `RunError` (with this result) unless the run answered."""
        raise_for_stop(self)
