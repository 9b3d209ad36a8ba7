"""Handoffs: `ReActLoop(..., handoffs=[billing, refunds])` lets the model hand the
conversation over to another ReAct loop, through a tool per target
(`transfer_to_<name>`). The target continues the conversation (all of it, or what
`input_filter` keeps) as a sub-run, and its answer ends the run; `result.answered_by`
names who answered.

A public module: `Handoff` and the stock filter `text_only` live here. Rule: records and
filters; the run's machine decides (`react._machine`), the driver runs the target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentloops.engine.subruns import AgentTool
from agentloops.errors import ConfigurationError
from agentloops.messages import Message, Text

__all__ = ["Handoff", "text_only"]

InputFilter = Callable[[list[Message]], Sequence[Message]]
"""What of the conversation a handoff's target gets: a valid transcript, ending on a user
turn."""


@dataclass(frozen=True, slots=True)
class Handoff:
    """One target of a loop's handoffs, with how it is offered to the model.

    Args:
        target: the `ReActLoop` that takes the conversation over.
        name: its name in the tool `transfer_to_<name>` and in `answered_by` (default: the
            target's own `name=`).
        description: what the model is told the target does (default: a sentence naming it).
        input_filter: what of the conversation the target gets (default: all of it, the
            handoff's turn included); `text_only` keeps the text of each turn.
    """

    target: Any
    name: str | None = None
    description: str | None = None
    input_filter: InputFilter | None = None

    def tool(self) -> AgentTool:
        """The tool the model calls to hand over."""
        name = self.name or getattr(self.target, "name", "")
        if not name:
            raise ConfigurationError(
                f"a handoff target needs a name: ReActLoop(..., name='billing') or "
                f"Handoff(loop, name='billing'), for {self.target!r:.60}"
            )
        if self.input_filter is not None and not callable(self.input_filter):
            raise ConfigurationError(f"handoff {name!r}: input_filter must be callable")
        description = self.description or (
            f"Hand the conversation over to {name}, who answers the user from here on. Call "
            f"it alone, when {name} is the one to deal with this request."
        )
        return AgentTool(
            self.target,
            name=f"transfer_to_{name}",
            description=description,
            handoff=True,
            target_name=name,
            input_filter=self.input_filter,
        )


def handoff_tools(handoffs: Iterable[Any], react: type) -> list[AgentTool]:
    """The tools of a loop's `handoffs=`: each a `Handoff`, or a loop with a `name`, whose
    target is a `react` loop (`ReActLoop`)."""
    tools = []
    for h in handoffs:
        handoff = h if isinstance(h, Handoff) else Handoff(h)
        if not isinstance(handoff.target, react):
            raise ConfigurationError(
                "a handoff's target continues the conversation, so it is a ReActLoop; give "
                f"a ReWOO or Plan-and-Execute loop as an agent tool instead (as_tool): "
                f"{handoff.target!r:.60}"
            )
        tools.append(handoff.tool())
    return tools


def text_only(messages: list[Message]) -> list[Message]:
    """The conversation as text: each turn's text blocks only (no tool calls, results or
    thinking), consecutive turns of one role joined, ending on the last user turn."""
    kept: list[Message] = []
    for m in messages:
        texts = tuple(b for b in m.content if type(b) is Text and b.text.strip())
        if not texts:
            continue
        if kept and kept[-1].role == m.role:
            kept[-1] = Message(m.role, (*kept[-1].content, *texts))
        else:
            kept.append(Message(m.role, texts))
    while kept and kept[-1].role != "user":
        kept.pop()
    while kept and kept[0].role != "user":
        kept.pop(0)
    return kept or [Message.user("(the conversation had no text)")]
