"""Replay determinism with compaction: a durable run that dies mid-run and is resumed makes
exactly the requests an uninterrupted run makes from where it died, and never asks again
for a summary the journal holds."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agentloops import Compaction, Message, ModelRequest, ModelResponse, ReActLoop, tool
from agentloops.journal import MemoryStore
from agentloops.messages import ToolCall, ToolResult, message_to_dict
from agentloops.model import message_chars
from agentloops.testing import FunctionModel, respond, use_tools
from agentloops.usage import Usage

PAGES = 14


@tool
def fetch(page: int) -> str:
    """Fetch one page."""
    return f"page {page}: " + "costs fell. " * 150


class Crash(BaseException):
    """The process dying (not an Exception: nothing records it)."""


def answer(request: ModelRequest, crash_at: int | None = None) -> ModelResponse:
    """The next page after the last one the view shows, then an answer; a summary for a
    compactor. Usage as a tokenizer denser than the estimate counts it."""
    used = Usage(
        input_tokens=math.ceil(sum(message_chars(m) for m in request.messages) / 3) + 20,
        output_tokens=5,
    )
    if request.role == "compactor":
        return respond("costs fell on every page so far", usage=used)
    last = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
    page = int(last[-1].content.split(":")[0].split()[1]) + 1 if last else 0
    if page == crash_at:
        raise Crash
    if page >= PAGES:
        return respond("costs fell", usage=used)
    return use_tools(ToolCall(f"call_{page}", "fetch", {"page": page}), usage=used)


def wire(requests: list[ModelRequest]) -> list[Any]:
    return [(r.role, r.system, [message_to_dict(m) for m in r.messages]) for r in requests]


def loop(model: FunctionModel, store: MemoryStore) -> ReActLoop:
    return ReActLoop(
        model,
        [fetch],
        max_steps=PAGES + 2,
        store=store,
        compaction=Compaction(3000, keep_last=2, reserve=256, elide_over=100_000),
    )


@pytest.mark.parametrize("crash_at", [5, 9, 12])
def test_a_resumed_run_sends_what_an_uninterrupted_one_sends(crash_at: int) -> None:
    whole = FunctionModel(answer)
    done = loop(whole, MemoryStore()).run("Read every page.", run_id="r")
    assert done.answer == "costs fell"
    assert any(r.role == "compactor" for r in whole.requests)

    store = MemoryStore()
    first = FunctionModel(lambda r: answer(r, crash_at))
    with pytest.raises(Crash):
        loop(first, store).run("Read every page.", run_id="r")
    resumed = FunctionModel(answer)
    result = loop(resumed, store).resume("r")
    assert result.answer == "costs fell"
    assert result.messages == done.messages and result.model_calls == done.model_calls

    sent_before = len(first.requests) - 1  # the last one died unanswered
    assert wire(resumed.requests) == wire(whole.requests[sent_before:])
    summaries = [r for r in whole.requests if r.role == "compactor"]
    asked_again = [r for r in resumed.requests if r.role == "compactor"]
    assert len(asked_again) == len(
        [r for r in whole.requests[sent_before:] if r.role == "compactor"]
    )
    assert len(asked_again) < len(summaries) or crash_at < 6


def test_resuming_under_other_compaction_settings_is_refused() -> None:
    store = MemoryStore()
    first = FunctionModel(lambda r: answer(r, 6))
    with pytest.raises(Crash):
        loop(first, store).run("Read every page.", run_id="r")
    other = ReActLoop(
        FunctionModel(answer), [fetch], max_steps=PAGES + 2, store=store, compaction=5000
    )
    from agentloops import CheckpointError

    with pytest.raises(CheckpointError, match="middleware"):
        other.resume("r")


def test_the_transcript_a_model_saw_after_compaction_is_valid_every_time() -> None:
    model = FunctionModel(answer)  # validates every request as the Anthropic API would
    result = ReActLoop(
        model, [fetch], max_steps=PAGES + 2, compaction=Compaction(2500, keep_last=1)
    ).run("Read every page.")
    assert result.answer == "costs fell"
    assert len(result.messages) == 1 + 2 * PAGES + 1
    first = model.requests[-1].messages[0]
    assert isinstance(first, Message) and first.content[0].text == "Read every page."
