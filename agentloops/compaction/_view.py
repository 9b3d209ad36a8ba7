"""The model's view of one live transcript: what `Compaction` sends instead of it, counted
as it grows.

A `View` follows the loop's transcript (which only grows; a nudge may replace its last
turn) and keeps an estimate per message, so a step costs the new messages only, never a
walk of the whole transcript. Until the first compaction the view is the live list itself.
A compaction replaces the start of the transcript, `live[:cut]`, with `prefix`; from then on
the view is one list, `prefix + live[cut:]`, extended in place as the loop appends (so a
provider's incremental wire form and a prompt cache's breakpoints hold) until the next
compaction. Three ways to make it smaller, applied in this order by the caller:

1. `elide`: old tool results replaced by a short note (the call and its result stay paired);
2. `splice`: the older turns replaced by a summary (or a note), joined to the task;
3. `cut`: the longest texts (a tool result, a paragraph of the task or of a ReWOO solver's
   evidence) cut down, longest first, each saying how much was cut.

Assistant turns are never changed (their thinking blocks go back as they came); a turn is
dropped whole or kept whole. The task (the first message) is always kept.

Rule: pure; the vocabulary (messages, the estimate) only.
"""

from __future__ import annotations

import math
from typing import Any

from agentloops.messages import Block, Message, Text, ToolCall, ToolResult
from agentloops.model import CHARS_PER_TOKEN, estimate_message_tokens

ELIDED = "[output elided to save context: {n} characters]"
"""What an old tool result becomes (its call, and whether it failed, are kept)."""
CUT = "\n[... {n} characters cut to fit the context window]"
"""What ends a text cut down to fit."""
SUMMARY = "Summary of the work so far (older turns were condensed to fit the context window):"
"""What opens the summary joined to the task."""
OMITTED = "[{n} earlier messages were left out to fit the context window]"
"""The note that stands for older turns when there is no summary."""
_SHORTEST_CUT = 200
"""No text is cut below this many characters."""


class View:
    """One live transcript's view and its running counts (see the module doc)."""

    __slots__ = (
        "built",
        "counts",
        "cut",
        "cut_total",
        "elided",
        "live_total",
        "messages",
        "prefix",
        "prefix_counts",
        "prefix_total",
        "ratio",
        "seen",
        "sent_estimate",
        "summary",
    )

    def __init__(self) -> None:
        self.seen: list[Message] = []
        """The live messages counted so far (the same objects)."""
        self.counts: list[int] = []
        """Each one's estimate, in tokens."""
        self.live_total = 0
        self.cut = 0
        """`live[:cut]` is represented by `prefix`."""
        self.cut_total = 0
        """`sum(counts[:cut])`."""
        self.prefix: list[Message] = []
        self.prefix_counts: list[int] = []
        self.prefix_total = 0
        self.elided = 0
        """The view's messages before this index have had their old outputs elided."""
        self.messages: list[Message] | None = None
        """The view (`prefix + live[cut:]`); `None`: the live list itself, uncompacted."""
        self.ratio = 1.0
        """Tokens the server counted per token estimated, learned from the replies' usage."""
        self.summary: Text | None = None
        """The summary block joined to the task, when there is one."""
        self.sent_estimate = 0
        """The estimate of the request last sent (the reply's usage calibrates on it)."""
        self.built: tuple[Any, Any] | None = None
        """The loop's request and the one built from it with the view, last step."""

    # -- following the live transcript -------------------------------------------------------

    def sync(self, live: list[Message]) -> list[Message]:
        """Count what `live` gained since the last call; the view to send."""
        n = len(self.seen)
        if n == len(live) and (not n or live[n - 1] is self.seen[-1]):
            return live if self.messages is None else self.messages  # nothing new: the hot path
        while n and (n > len(live) or live[n - 1] is not self.seen[n - 1]):
            n -= 1  # the live list no longer holds what was counted here (a nudge's rewrite)
            self.live_total -= self.counts.pop()
            self.seen.pop()
            if self.messages is not None and n >= self.cut:
                self.messages.pop()
        if n < self.cut:  # a rewrite inside the compacted part: start over
            self.__init__()  # type: ignore[misc]
            return self.sync(live)
        for m in live[n:]:
            count = estimate_message_tokens(m)
            self.seen.append(m)
            self.counts.append(count)
            self.live_total += count
            if self.messages is not None:
                self.messages.append(m)
        return live if self.messages is None else self.messages

    def estimate(self, frame: int) -> int:
        """The view's size in estimated tokens, with `frame` (system prompt, tools)."""
        return frame + self.prefix_total + self.live_total - self.cut_total

    def tokens(self, frame: int) -> int:
        """The view's size as the server would count it (the estimate, calibrated)."""
        return math.ceil(self.estimate(frame) * self.ratio)

    def current(self, live: list[Message]) -> list[Message]:
        return live if self.messages is None else self.messages

    # -- making it smaller -----------------------------------------------------------------

    def elide(self, live: list[Message], keep_last: int, longer_than: int) -> int:
        """Replace the tool results before the last `keep_last` turns (longer than
        `longer_than` characters) with a note; how many were elided."""
        view = self.current(live)
        start = tail_start(view, keep_last)
        if start is None:
            return 0
        head, elided = view[: self.elided], 0  # elided last time: as they are
        for m in view[self.elided : start]:
            changed, n = _elided(m, longer_than)
            head.append(changed)
            elided += n
        if elided:
            self._replace(live, start, head)
        self.elided = max(self.elided, start)
        return elided

    def older(self, live: list[Message], keep_last: int) -> list[Message]:
        """The messages a summary would stand for: after the task, before the last
        `keep_last` turns (empty: nothing to summarise)."""
        view = self.current(live)
        start = tail_start(view, keep_last)
        return [] if start is None or start <= 1 else view[1:start]

    def splice(self, live: list[Message], keep_last: int, summary: str | None) -> int:
        """Replace the `older` messages with `summary` joined to the task (a note saying how
        many were left out when `summary` is `None`); how many were replaced."""
        view = self.current(live)
        start = tail_start(view, keep_last)
        if start is None or start <= 1:
            return 0
        task = view[0]
        kept = tuple(b for b in task.content if b is not self.summary)
        text = f"{SUMMARY}\n{summary}" if summary else OMITTED.format(n=start - 1)
        self.summary = Text(text)
        self._replace(live, start, [Message(task.role, (*kept, self.summary))])
        self.elided = 1
        return start - 1

    def cut_texts(self, live: list[Message], excess_tokens: int) -> int:
        """Cut the longest texts the user side of the view holds (tool results, paragraphs
        of text) until about `excess_tokens` fewer are sent: longest first, all cut to one
        length, each saying how much was cut. How many texts were cut."""
        view = self.current(live)
        excess = math.ceil(excess_tokens * CHARS_PER_TOKEN / max(self.ratio, 0.1)) + 64
        pieces = _pieces(view)
        cap = _cap([length for _, _, _, length in pieces], excess)
        if cap is None:
            return 0
        changed: dict[int, Message] = {}
        cut = 0
        for index, block, part, length in pieces:
            if length <= cap:
                continue
            message = changed.get(index, view[index])
            changed[index] = _cut_piece(message, block, part, cap)
            cut += 1
        if not cut:
            return 0
        end = max(changed) + 1
        self._replace(live, end, [changed.get(i, m) for i, m in enumerate(view[:end])])
        return cut

    def _replace(self, live: list[Message], start: int, head: list[Message]) -> None:
        """The view's first `start` messages become `head`; the view is a new list. Only
        the messages of `head` that are new are counted again."""
        view = self.current(live)
        old_prefix, old_cut = len(self.prefix), self.cut
        counts = [
            self._count(view, i) if i < len(view) and m is view[i] else estimate_message_tokens(m)
            for i, m in enumerate(head)
        ]
        self.prefix = head + view[start:old_prefix]
        self.prefix_counts = counts + self.prefix_counts[start:old_prefix]
        self.prefix_total = sum(self.prefix_counts)
        self.cut += max(0, start - old_prefix)
        self.cut_total += sum(self.counts[old_cut : self.cut])  # the newly cut part only
        self.messages = self.prefix + live[self.cut :]

    def _count(self, view: list[Message], i: int) -> int:
        """The known estimate of the view's message `i`."""
        prefix = len(self.prefix)
        return self.prefix_counts[i] if i < prefix else self.counts[self.cut + i - prefix]


def tail_start(view: list[Message], keep_last: int) -> int | None:
    """Where the last `keep_last` turns begin (the index of an assistant message), or
    `None` when there is no older turn to compact."""
    seen = 0
    for i in range(len(view) - 1, 0, -1):
        if view[i].role == "assistant":
            seen += 1
            if seen == keep_last:
                return i if i > 1 else None
    if keep_last <= 0 and len(view) > 1:
        return len(view)
    return None


def _elided(message: Message, longer_than: int) -> tuple[Message, int]:
    if message.role != "user":
        return message, 0
    blocks: list[Block] = []
    n = 0
    for b in message.content:
        if type(b) is ToolResult and len(b.content) > longer_than and not _is_note(b.content):
            b = ToolResult(b.call_id, ELIDED.format(n=len(b.content)), b.is_error)
            n += 1
        blocks.append(b)
    return (Message(message.role, tuple(blocks)), n) if n else (message, 0)


def _is_note(text: str) -> bool:
    return text.startswith("[output elided")


def _pieces(view: list[Message]) -> list[tuple[int, int, int, int]]:
    """Every text that may be cut: (message index, block index, paragraph index or -1 for a
    whole tool result, length). The task's first paragraph is never cut."""
    found = []
    for i, m in enumerate(view):
        if m.role != "user":
            continue
        for j, b in enumerate(m.content):
            if type(b) is ToolResult:
                found.append((i, j, -1, len(b.content)))
            elif type(b) is Text:
                for k, paragraph in enumerate(b.text.split("\n\n")):
                    if not (i == 0 and j == 0 and k == 0):
                        found.append((i, j, k, len(paragraph)))
    return found


def _cap(lengths: list[int], excess: int) -> int | None:
    """The length to cut every longer text to, so that about `excess` characters go
    (longest first); `None` when nothing is long enough to cut."""
    ordered = sorted((n for n in lengths if n > _SHORTEST_CUT), reverse=True)
    if not ordered:
        return None
    removed = 0
    for i, length in enumerate(ordered):
        following = ordered[i + 1] if i + 1 < len(ordered) else _SHORTEST_CUT
        # cutting the i + 1 longest down to `following` removes this much more
        step = (length - following) * (i + 1)
        if removed + step >= excess:
            return max(_SHORTEST_CUT, length - math.ceil((excess - removed) / (i + 1)))
        removed += step
    return _SHORTEST_CUT


def _cut_piece(message: Message, block_index: int, part: int, cap: int) -> Message:
    blocks = list(message.content)
    b = blocks[block_index]
    if type(b) is ToolResult:
        blocks[block_index] = ToolResult(b.call_id, _cut(b.content, cap), b.is_error)
    elif type(b) is Text:
        paragraphs = b.text.split("\n\n")
        paragraphs[part] = _cut(paragraphs[part], cap)
        blocks[block_index] = Text("\n\n".join(paragraphs))
    return Message(message.role, tuple(blocks))


def _cut(text: str, cap: int) -> str:
    return text[:cap] + CUT.format(n=len(text) - cap) if len(text) > cap else text


def calls_by_id(messages: list[Message]) -> dict[str, ToolCall]:
    """The tool calls among `messages`, by id (to name a result in a summary's source)."""
    return {c.id: c for m in messages for c in m.tool_calls}
