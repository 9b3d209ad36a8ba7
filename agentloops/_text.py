"""Cutting long text for a prompt: one helper for every place that bounds what a model reads."""

from __future__ import annotations


def cut(text: str, limit: int, marker: str = "[... {cut} of {total} characters cut ...]") -> str:
    """`text` if it has at most `limit` characters; else its head and tail around `marker`
    (formatted with `cut` and `total`), so both ends stay visible."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = text[-(limit - head) :] if limit - head else ""
    return f"{text[:head]}\n{marker.format(cut=len(text) - limit, total=len(text))}\n{tail}"


def cut_tail(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; else its head and a note of the cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"
