"""The view's pure core: incremental counts, elision, the summary splice and cutting long
texts, each leaving a transcript the Anthropic API would take."""

from __future__ import annotations

from agentloops.compaction._view import CUT, ELIDED, SUMMARY, View, tail_start
from agentloops.messages import Message, Text, Thinking, ToolCall, ToolResult, validate_transcript
from agentloops.model import estimate_message_tokens


def turn(i: int, output: str = "x" * 1000) -> list[Message]:
    call = ToolCall(f"c{i}", "lookup", {"q": i})
    thinking = Thinking(f"thought {i}", signature=f"sig{i}")
    return [
        Message("assistant", (thinking, call)),
        Message("user", (ToolResult(f"c{i}", output),)),
    ]


def transcript(turns: int) -> list[Message]:
    live = [Message.user("the task")]
    for i in range(turns):
        live += turn(i)
    return live


def test_counts_grow_with_the_new_messages_only() -> None:
    live = transcript(2)
    view = View()
    assert view.sync(live) is live  # uncompacted: the live list itself
    total = sum(estimate_message_tokens(m) for m in live)
    assert view.estimate(0) == total
    live += turn(2)
    view.sync(live)
    assert view.estimate(0) == sum(estimate_message_tokens(m) for m in live)
    assert view.seen[-1] is live[-1] and len(view.counts) == len(live)


def test_a_rewritten_last_turn_is_counted_again() -> None:
    live = transcript(1)
    view = View()
    view.sync(live)
    live[-1] = Message("user", (*live[-1].content, Text("Your reply was empty.")))
    view.sync(live)
    assert view.estimate(0) == sum(estimate_message_tokens(m) for m in live)


def test_elide_replaces_old_results_and_keeps_the_last_turns_and_every_pair() -> None:
    live = transcript(5)
    view = View()
    view.sync(live)
    before = view.estimate(0)
    assert view.elide(live, keep_last=2, longer_than=200) == 3
    sent = view.current(live)
    validate_transcript(sent)
    assert [m.role for m in sent] == [m.role for m in live]
    assert sent[2].tool_results[0].content == ELIDED.format(n=1000)
    assert sent[-1] is live[-1] and sent[-3] is live[-3]  # the kept turns, as they were
    assert all(sent[i] is live[i] for i in range(1, len(live), 2))  # assistant turns untouched
    assert view.estimate(0) < before
    assert live[2].tool_results[0].content == "x" * 1000  # the run's own transcript


def test_the_view_is_extended_in_place_until_the_next_compaction() -> None:
    live = transcript(5)
    view = View()
    view.sync(live)
    view.elide(live, keep_last=2, longer_than=200)
    sent = view.current(live)
    prefix = list(sent[:7])
    live += turn(5)
    assert view.sync(live) is sent  # the same list, grown: a provider converts the new part
    assert sent[:7] == prefix and sent[-1] is live[-1]
    assert view.estimate(0) == view.prefix_total + sum(view.counts[view.cut :])


def test_splice_joins_a_summary_to_the_task_and_keeps_the_tail() -> None:
    live = transcript(6)
    view = View()
    view.sync(live)
    older = view.older(live, keep_last=2)
    assert older == live[1:9]
    assert view.splice(live, 2, "found a, b and c") == 8
    sent = view.current(live)
    validate_transcript(sent)
    assert sent[0].content[0] == Text("the task")
    assert sent[0].content[1].text == f"{SUMMARY}\nfound a, b and c"
    assert sent[1:] == live[9:]
    # A second summary replaces the first; the task stays.
    live += turn(6) + turn(7)
    view.sync(live)
    view.splice(live, 2, "all of it")
    sent = view.current(live)
    validate_transcript(sent)
    assert [b.text for b in sent[0].content] == ["the task", f"{SUMMARY}\nall of it"]
    assert sent[1:] == live[-4:]


def test_nothing_to_compact_in_the_kept_turns() -> None:
    live = transcript(2)
    view = View()
    view.sync(live)
    assert view.elide(live, keep_last=2, longer_than=10) == 0
    assert view.older(live, keep_last=2) == []
    assert view.messages is None
    assert tail_start(live, 1) == 3


def test_cut_texts_cuts_the_longest_first_and_says_so() -> None:
    evidence = "\n\n".join(["Task: compare", "E1: " + "a" * 5000, "E2: " + "b" * 500, "E3: ok"])
    live = [Message.user(evidence)]
    view = View()
    view.sync(live)
    before = view.estimate(0)
    assert view.cut_texts(live, excess_tokens=1000) == 1
    text = view.current(live)[0].text
    assert text.startswith("Task: compare\n\nE1: aaa") and "b" * 500 in text and "E3: ok" in text
    assert CUT.split("{n}")[0] in text and "characters cut to fit" in text
    assert before - view.estimate(0) >= 1000


def test_cut_texts_cuts_a_large_result_in_the_last_turn() -> None:
    live = transcript(1)
    live[-1] = Message("user", (ToolResult("c0", "z" * 20000),))
    view = View()
    view.sync(live)
    assert view.cut_texts(live, excess_tokens=3000) == 1
    sent = view.current(live)
    validate_transcript(sent)
    assert len(sent[-1].tool_results[0].content) < 20000 - 3000 * 4
    assert sent[1] is live[1]


def test_the_event_says_how_much_and_turns_into_json() -> None:
    import json

    from agentloops.events import ContextCompacted

    event = ContextCompacted(
        loop="react",
        run_id="r",
        step=7,
        role="react",
        reason="budget",
        tokens_before=7900,
        tokens_after=4100,
        max_context_tokens=8192,
        elided=5,
        summarized=8,
    )
    data = json.loads(event.to_json())
    assert data["event"] == "ContextCompacted"
    assert (data["tokens_before"], data["tokens_after"], data["elided"]) == (7900, 4100, 5)
    assert (data["summarized"], data["cut"], data["reason"]) == (8, 0, "budget")
    assert data == {**event.to_dict(), "at": data["at"], "ts": data["ts"]}
