"""The public surface: `__all__` is sorted and lists exactly the public names."""

from __future__ import annotations

import agentloops


def test_all_is_sorted_and_complete() -> None:
    public = {n for n in vars(agentloops) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(agentloops, n)).__name__ == "module"}
    assert agentloops.__all__ == sorted(agentloops.__all__)
    assert set(agentloops.__all__) == public - modules - {"annotations"}
