"""Cutting long text: one helper for every place that bounds what a model reads (tool
outputs, evidence in a solver prompt, findings in a step prompt, a rejected plan, the names
and values quoted in a problem or a validation error).

Rule: the bottom of the package: it imports nothing from agentloops (the other helpers
import it).
"""

from __future__ import annotations

_SPARE = 120
"""What `within` leaves for the marker at least: a caller may add a short prefix (an
error's "'tool' failed: ") and still fit."""


def cut(
    text: str,
    limit: int,
    marker: str = "[... {cut} of {total} characters cut ...]",
    *,
    tail: bool = True,
    within: bool = False,
) -> str:
    """`text` if it has at most `limit` characters; else a shorter text that says so.

    Args:
        marker: the note put where text was cut, formatted with `cut` (characters left
            out) and `total` (the text's length).
        tail: keep the head and the tail around the marker (both ends stay visible), or
            only the head, with the marker after it.
        within: make the result itself fit in `limit` (the marker counts); otherwise
            `limit` characters of the text are kept and the marker comes on top.
    """
    total = len(text)
    if total <= limit:
        return text
    room = limit
    if within:  # the marker counts, with room to spare for a prefix the caller adds
        room = max(0, limit - max(_SPARE, len(marker.format(cut=total, total=total)) + 2))
    if not tail:
        return f"{text[:room]} {marker.format(cut=total - room, total=total)}"
    head = room // 2
    end = text[total - (room - head) :] if room - head else ""
    return f"{text[:head]}\n{marker.format(cut=total - room, total=total)}\n{end}"


def quoted(value: object, limit: int) -> str:
    """`repr(value)`, cut to `limit` characters (and a marker): a name or a value quoted in
    a message a model reads."""
    return cut(repr(value), limit, "[...]", tail=False)
