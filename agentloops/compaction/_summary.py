"""The summary call's request: the older turns rendered as plain text for a model to
condense (a request with no tools, so no call needs its result next to it).

Rule: pure; the vocabulary only.
"""

from __future__ import annotations

import json

from agentloops.compaction._view import SUMMARY, calls_by_id
from agentloops.messages import Message, Text, ToolCall, ToolResult
from agentloops.model import CHARS_PER_TOKEN, ModelRequest

SUMMARY_SYSTEM = (
    "You condense the earlier part of an AI agent's working session so that it can go on "
    "without it. Write a short summary that keeps every fact, number, name, identifier and "
    "finding the agent obtained, which tools it called and what they returned (or that "
    "they failed), and what it still had to do. Plain prose or a terse list; no preamble."
)
"""The summary call's system prompt."""

_PART = 1500
"""At most this many characters of any one text or tool result go to the summariser."""


def summary_request(
    task: Message, older: list[Message], *, budget_tokens: int, max_tokens: int
) -> ModelRequest:
    """The request for a summary of `older` (the previous summary, if the task carries one,
    is among what is summarised), within `budget_tokens` of input."""
    lines = [f"The agent's task:\n{_task_text(task)}"]
    previous = [b.text for b in task.content if type(b) is Text and b.text.startswith(SUMMARY)]
    if previous:
        lines.append(f"Summary of what came before:\n{previous[-1][len(SUMMARY) :].strip()}")
    lines.append("The turns to condense:")
    calls = calls_by_id(older)
    for m in older:
        lines.extend(_render(m, calls))
    room = max(1000, int(budget_tokens * CHARS_PER_TOKEN * 0.8))
    text = _fit("\n".join(lines), room)
    return ModelRequest(
        SUMMARY_SYSTEM, [Message.user(text)], max_tokens=max_tokens, role="compactor"
    )


def _task_text(task: Message) -> str:
    texts = [b.text for b in task.content if type(b) is Text and not b.text.startswith(SUMMARY)]
    return _short("\n".join(texts), 4 * _PART)


def _render(message: Message, calls: dict[str, ToolCall]) -> list[str]:
    out = []
    for b in message.content:
        if type(b) is Text and b.text.strip():
            who = "Agent" if message.role == "assistant" else "User"
            out.append(f"{who}: {_short(b.text, _PART)}")
        elif type(b) is ToolCall:
            args = json.dumps(b.args, ensure_ascii=False, default=str)
            out.append(f"Agent called {b.name}({_short(args, 300)})")
        elif type(b) is ToolResult:
            call = calls.get(b.call_id)
            name = call.name if call is not None else "a tool"
            status = "failed" if b.is_error else "returned"
            out.append(f"{name} {status}: {_short(b.content, _PART)}")
    return out


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else f"{text[:most]} [... {len(text) - most} more]"


def _fit(text: str, most: int) -> str:
    """The start and the end of `text` when it is longer than `most` characters (the
    newest turns matter most, the task is at the start)."""
    if len(text) <= most:
        return text
    half = most // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"
