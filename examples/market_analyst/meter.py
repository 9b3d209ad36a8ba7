"""Usage per run: a `Meter` watches each role's client and totals tokens and calls by role.

Its wrapper (`watch.Watched`) keeps the client's blocking and asyncio forms, so a metered
client behaves under the asyncio driver as the bare client would. `take` hands over what
was spent since the last take, for the run's journal (a replayed model call is not made,
so not counted).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from agentloops import ModelClient, Usage
from market_analyst.watch import CallFinished, Note, Watched


class Meter:
    """Totals usage and counts model calls per role, over every client it wraps."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrap(self, model: ModelClient) -> ModelClient:
        """`model`, with every call counted here. Thread-safe."""
        return Watched(model, self._count)

    def take(self) -> dict[str, Any] | None:
        """What was spent since the last take (`usage`, `calls_by_role`), or None if nothing."""
        with self._lock:
            usage, calls = self.usage, self.calls
            self.usage, self.calls = Usage(), {}
        if not calls and usage == Usage():
            return None
        return {"usage": dataclasses.asdict(usage), "calls_by_role": calls}

    def _count(self, note: Note) -> None:
        if isinstance(note, CallFinished):
            with self._lock:
                self.usage = self.usage + note.response.usage
                self.calls[note.role] = self.calls.get(note.role, 0) + 1
