"""What a comparison records: one `Attempt` per run, one `LoopSummary` per loop.

Rule: plain records; `comparison/__init__` builds them and `_report` shows them, so
neither of those imports the other through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from agentloops.usage import Usage


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One run of one loop on one task."""

    loop: str
    task: str
    trial: int
    """0-based repetition number."""
    answer: str
    success: bool
    """The checker accepted the answer (always False when the run raised)."""
    stop_reason: str
    """The result's `stop_reason` when it has one; `"error"` when the run raised."""
    error: str = ""
    """`"TypeName: message"` when the run raised."""
    verdict: str = ""
    """The evaluator's verdict; "" without one, `"error: TypeName: message"` when it raised."""
    model_calls: int
    usage: Usage
    tool_calls: int
    tool_errors: int
    seconds: float
    """Wall time of `.run(task)` alone."""
    cost: Decimal | None = None
    """What the attempt's model calls cost (raised attempts included), when the loop knows
    its models' prices; `None` otherwise."""
    cost_by_role: dict[str, Decimal] = field(default_factory=dict)
    """The cost per role ("planner", "react", "solver", "reporter"...)."""

    @property
    def judged(self) -> bool:
        """The evaluator gave a verdict on this attempt."""
        return bool(self.verdict) and not self.verdict.startswith("error")

    @property
    def incorrect_acceptance(self) -> bool:
        """The evaluator passed an answer the checker rejects."""
        return self.verdict == "pass" and not self.success

    @property
    def recovered(self) -> bool:
        """A tool failed during the run, and the answer was still right."""
        return self.tool_errors > 0 and self.success


@dataclass(frozen=True, kw_only=True)
class LoopSummary:
    """Totals over every attempt of one loop; the rates and `mean` divide them."""

    loop: str
    attempts: int
    successes: int
    errors: int
    """Attempts that raised."""
    rejected: int
    """Judged attempts whose answer the checker rejects (0 without an evaluator)."""
    incorrect_acceptances: int
    model_calls: int
    usage: Usage
    tool_calls: int
    tool_errors: int
    attempts_with_tool_errors: int
    recoveries: int
    seconds: float
    cost: Decimal | None = None
    """The attempts' cost in all; `None` when any attempt's cost is unknown."""
    cost_by_role: dict[str, Decimal] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0

    @property
    def incorrect_acceptance_rate(self) -> float:
        """Of the judged wrong answers, the share the evaluator passed."""
        return self.incorrect_acceptances / self.rejected if self.rejected else 0.0

    @property
    def recovery_rate(self) -> float:
        """Of the attempts that saw a tool error, the share that still answered right."""
        n = self.attempts_with_tool_errors
        return self.recoveries / n if n else 0.0

    @property
    def cost_per_attempt(self) -> Decimal | None:
        """The mean cost of an attempt (exact), or `None` when it is not known."""
        if self.cost is None or not self.attempts:
            return None
        return self.cost / self.attempts

    def mean(self, total: float) -> float:
        """`total` per attempt, e.g. `s.mean(s.usage.output_tokens)`."""
        return total / self.attempts if self.attempts else 0.0
