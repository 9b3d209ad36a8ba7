"""Which paused runs were already resumed in this process, whichever object resumed them.

An approved call must run once. A pause is claimed when it resumes, so a second resume
of the same pause (through another loop object, or a copy of the result) is refused
instead of running the call again. Across processes the durable store does this job.

Rule: in-process bookkeeping only; the durable store does this across processes.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from agentloops.errors import ConfigurationError
from agentloops.messages import ToolCall

_MAX_REMEMBERED = 100_000

_claimed: OrderedDict[tuple[str, int, str], None] = OrderedDict()
_lock = threading.Lock()


def claim(run_id: str, turn: int, calls: list[ToolCall]) -> None:
    """Mark the pause of `run_id` at transcript length `turn` on `calls` as resumed.

    Raises:
        ConfigurationError: it was already resumed in this process.
    """
    shown = json.dumps([[c.id, c.name, c.args] for c in calls], sort_keys=True, default=str)
    key = (run_id, turn, shown)
    with _lock:
        if key in _claimed:
            raise ConfigurationError(f"run {run_id} was already resumed from this pause")
        _claimed[key] = None
        if len(_claimed) > _MAX_REMEMBERED:
            _claimed.popitem(last=False)
