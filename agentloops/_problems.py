"""A bounded list of problems with a plan, for the caller and for a planner to fix.

A broken plan can have thousands of problems (5,000 steps with one id each repeated);
a re-plan prompt that lists them all costs more than it helps. The list keeps the first
`MAX_PROBLEMS`, each cut to `MAX_PROBLEM_CHARS`, and ends by saying how many more.

Rule: a helper at the bottom of the package; it imports only `_text` from agentloops.
"""

from __future__ import annotations

from agentloops._text import cut

MAX_PROBLEMS = 50
MAX_PROBLEM_CHARS = 500


class Problems:
    """Collects problems in order; past the limit it only counts them."""

    def __init__(self, limit: int = MAX_PROBLEMS):
        self.limit = limit
        self.items: list[str] = []
        self.more = 0

    def add(self, problem: str) -> None:
        if len(self.items) < self.limit:
            # the head and the marker fit in MAX_PROBLEM_CHARS
            self.items.append(cut(problem, MAX_PROBLEM_CHARS - 20, "[... cut short]", tail=False))
        else:
            self.more += 1

    def extend(self, problems: list[str]) -> None:
        for p in problems:
            self.add(p)

    def listed(self) -> list[str]:
        """The problems kept, and a last line with the count of the rest when any."""
        if not self.more:
            return list(self.items)
        return [*self.items, f"... and {self.more} more problems not listed; fix these first"]


def listed(values: list[int], limit: int = 10) -> str:
    """`1, 2, 3` or `1, 2, ... (5000 in all)`: positions, without a thousand of them."""
    shown = ", ".join(str(v) for v in values[:limit])
    return shown if len(values) <= limit else f"{shown}, ... ({len(values)} in all)"
