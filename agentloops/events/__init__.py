"""Typed run events, the sinks that record them, and a durable run's events replayed.

Every loop takes `on_event`, a plain callable that receives each event as it happens, on
the thread that runs the loop (`events.kinds`: the events, `JSONLSink`, `event_to_dict`).
`replay_events(records)` (`events.replay`, loaded on first use) gives a durable run's
events again from its journal, for a run this process does not drive.

Rule: the facade of the events; `kinds` and `replay` never import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentloops.events.kinds import (
    LOOPS,
    ApprovalRequested,
    ContextCompacted,
    Delta,
    Event,
    EventSink,
    GuardTripped,
    JSONLSink,
    ModelAttempt,
    ModelCallFinished,
    ModelCallStarted,
    OutputDelta,
    PlanMade,
    Record,
    Replanned,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    event_to_dict,
)

if TYPE_CHECKING:  # pragma: no cover
    from agentloops.events.replay import EventReplay, replay_events

__all__ = [
    "LOOPS",
    "ApprovalRequested",
    "ContextCompacted",
    "Delta",
    "Event",
    "EventReplay",
    "EventSink",
    "GuardTripped",
    "JSONLSink",
    "ModelAttempt",
    "ModelCallFinished",
    "ModelCallStarted",
    "OutputDelta",
    "PlanMade",
    "Record",
    "Replanned",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "StepStarted",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "event_to_dict",
    "replay_events",
]


def __getattr__(name: str) -> object:
    # The replay loads on first use: most programs only emit events.
    if name in ("EventReplay", "replay_events"):
        from agentloops.events import replay

        return getattr(replay, name)
    raise AttributeError(f"module 'agentloops.events' has no attribute {name!r}")
