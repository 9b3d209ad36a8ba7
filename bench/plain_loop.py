"""The yardstick: a lean hand-written ReAct loop doing the same work as `ReActLoop`.

Frozen dataclass messages, dict dispatch, no validation, no limits beyond a step
count, no events. What any loop has to pay per step; agentloops is measured against it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Result:
    call_id: str
    content: str


@dataclass(frozen=True, slots=True)
class Msg:
    role: str
    content: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Reply:
    message: Msg
    stop_reason: str


class PlainModel:
    """Hands back prebuilt replies in order."""

    def __init__(self, replies: list[Reply]):
        self._next = iter(replies).__next__

    def complete(self, messages: list[Msg]) -> Reply:
        return self._next()


def plain_script(steps: int) -> list[Reply]:
    replies = [
        Reply(Msg("assistant", (Call(f"call_{i}", "add", {"a": i, "b": 1}),)), "tool_use")
        for i in range(steps)
    ]
    replies.append(Reply(Msg("assistant", ("done",)), "end_turn"))
    return replies


def plain_loop(
    model: PlainModel, tools: dict[str, Callable[..., str]], task: str, max_steps: int
) -> tuple[str, list[Msg]]:
    messages = [Msg("user", (task,))]
    for _ in range(max_steps):
        reply = model.complete(messages)
        messages.append(reply.message)
        calls = [b for b in reply.message.content if type(b) is Call]
        if not calls:
            return reply.message.content[0], messages
        results = tuple(Result(c.id, tools[c.name](**c.args)) for c in calls)
        messages.append(Msg("user", results))
    return "", messages
