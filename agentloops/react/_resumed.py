"""Resuming a paused ReAct run from its result: the checks a pause passes, and which pauses
were already resumed in this process, whichever object resumed them.

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
from agentloops.react.result import ReActResult

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


def check_resumable(result: ReActResult, decisions: dict[str, bool]) -> list[ToolCall]:
    """The run's own pending calls of a pause that may resume now (those of its paused
    sub-runs resume with them); marks the pause as resumed."""
    if result.stop_reason != "approval_required":
        raise ConfigurationError(f"only a paused run can resume, not {result.stop_reason!r}")
    keys = list(result.pending_paths) or [c.id for c in result.pending_approvals]
    if len(keys) != len(result.pending_approvals):
        raise ConfigurationError("the pending calls do not match their paths")
    pending = dict(zip(keys, result.pending_approvals, strict=True))
    unknown = sorted(set(decisions) - set(pending))
    if unknown:
        raise ConfigurationError(f"no pending call with id {unknown}; pending: {sorted(pending)}")
    missing = sorted(set(pending) - set(decisions))
    if missing:
        raise ConfigurationError(f"no decision for pending calls {missing}")
    not_bool = sorted(k for k, v in decisions.items() if not isinstance(v, bool))
    if not_bool:  # a truthy "no" must never approve a call
        raise ConfigurationError(f"decisions must be True or False; not for {not_bool}")
    own_path = (result.run_id,)
    own = {k: c for k, c in pending.items() if result.pending_paths.get(k, own_path) == own_path}
    turn = result.messages[-1]
    shown = {c.id: c for c in turn.tool_calls}
    if any(shown.get(i) != c for i, c in own.items()):
        raise ConfigurationError("pending calls do not match the transcript's last turn")
    waiting = {s.call_id for s in result.subruns if s.stop_reason == "approval_required"}
    if set(shown) != set(own) | {r.call_id for r in result.held_results} | waiting:
        raise ConfigurationError("the paused turn has calls that are neither held nor pending")
    claim(result.run_id, len(result.messages), list(pending.values()))
    return list(own.values())
