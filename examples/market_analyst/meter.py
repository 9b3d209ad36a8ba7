"""Usage per run: a `Meter` wraps each role's client and totals tokens and calls by role.

The wrapper keeps the client's blocking and asyncio forms, so a metered client behaves
under the asyncio driver as the bare client would. `take` hands over what was spent since
the last take, for the run's journal (a replayed model call is not made, so not counted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from agentloops import ModelClient, ModelRequest, ModelResponse, Usage
from market_analyst.roles import role_of


class Meter:
    """Totals usage and counts model calls per role, over every client it wraps."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrap(self, model: ModelClient) -> ModelClient:
        """`model`, with every call counted here. Thread-safe."""
        return _Metered(model, self)

    def take(self) -> dict[str, Any] | None:
        """What was spent since the last take (`usage`, `calls_by_role`), or None if nothing."""
        with self._lock:
            usage, calls = self.usage, self.calls
            self.usage, self.calls = Usage(), {}
        if not calls and usage == Usage():
            return None
        return {"usage": dataclasses.asdict(usage), "calls_by_role": calls}

    def add(self, request: ModelRequest, response: ModelResponse) -> None:
        role = role_of(request)
        with self._lock:
            self.usage = self.usage + response.usage
            self.calls[role] = self.calls.get(role, 0) + 1


@dataclasses.dataclass
class _Metered:
    model: ModelClient
    meter: Meter

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.model.complete(request)
        self.meter.add(request, response)
        return response

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        """The wrapped client's own `acomplete` when it has one, else `complete` in a
        thread (as the asyncio driver would call it unwrapped)."""
        acomplete = getattr(self.model, "acomplete", None)
        if acomplete is not None:
            response: ModelResponse = await acomplete(request)
        else:
            response = await asyncio.to_thread(self.model.complete, request)
        self.meter.add(request, response)
        return response
