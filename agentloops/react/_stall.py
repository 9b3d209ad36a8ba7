"""The ReAct stall guard: the same calls getting the same results, turn after turn.

A turn repeats, or a cycle of two or three turns comes back, `max_repeats` times: the run
stops with "stalled" instead of spending its budget going round. Rule: it compares turns
it is given; it knows no model, tool or driver.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from agentloops.messages import ToolCall, ToolResult

PERIODS = (1, 2, 3)
"""Cycle lengths the guard looks for: A A A, A B A B A B, A B C A B C A B C."""


def window(max_repeats: int | None) -> deque[Any]:
    """The last turns the guard keeps: enough for its longest cycle."""
    return deque(maxlen=(max_repeats or 0) * PERIODS[-1])


def stalled(
    turns: deque[Any], n: int | None, calls: list[ToolCall], results: list[ToolResult]
) -> bool:
    """Whether the last turns repeat one turn, or a cycle of two or three turns,
    `max_repeats` times."""
    if n is None:
        return False
    # A turn's results come first: they are what usually differs, and a string
    # compares faster than the arguments' dict.
    if len(calls) == 1:  # the common case, without building a list
        c, r = calls[0], results[0]
        turn: Any = (r.content, r.is_error, c.name, c.args)
    else:
        pairs = zip(calls, results, strict=True)
        turn = [(r.content, r.is_error, c.name, c.args) for c, r in pairs]
    turns.append(turn)
    # Any repeat of it n times leaves this turn n times in the window: counting (in C)
    # is the quick, usual way out.
    if turns.count(turn) < n:
        return False
    return any(cycles(turns, p, n) for p in PERIODS)


def stall_detail(n: int) -> str:
    """Why a run stopped with "stalled", quoting the limit."""
    return (
        f"max_repeats={n}: the same calls got the same results {n} turns in a row "
        f"(or the same cycle of turns came back {n} times)"
    )


def cycles(turns: deque[Any], p: int, n: int) -> bool:
    """Whether the last `p * n` turns are one cycle of `p` turns, `n` times over."""
    span = p * n
    return len(turns) >= span and all(turns[-i] == turns[-i - p] for i in range(1, span - p + 1))
