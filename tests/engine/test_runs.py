"""What every run shares (`agentloops.engine.runs`): one running total that every model call
adds to, structured and text calls included, and one nudge after an empty reply."""

from __future__ import annotations

import pydantic
import pytest

from agentloops import (
    Message,
    ModelCallStarted,
    ModelOutputError,
    ModelResponse,
    ReActLoop,
    Text,
    Thinking,
    Usage,
    ask_text,
    tool,
)
from agentloops.engine import sync
from agentloops.engine.host import NO_TOOLS
from agentloops.engine.runs import Totals
from agentloops.structured import structured_machine, text_machine
from agentloops.testing import ScriptedModel, respond, respond_structured

U = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2, cache_write_tokens=1)
EARLIER = Usage(input_tokens=100, output_tokens=10)


class City(pydantic.BaseModel):
    name: str


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def empty(*blocks: object) -> ModelResponse:
    return ModelResponse(Message("assistant", tuple(blocks)), "end_turn", U)  # type: ignore[arg-type]


# -- one running total ---------------------------------------------------------------------


def test_a_structured_answer_adds_each_attempt_to_the_run_and_reports_its_own_share() -> None:
    totals = Totals(usage=EARLIER, model_calls=4)
    model = ScriptedModel(
        [respond("not json", usage=U), respond_structured({"name": "Oslo"}, usage=U)]
    )
    reply = sync.run(structured_machine(model, City, "q", totals=totals), NO_TOOLS)
    assert (reply.value, reply.usage, reply.model_calls) == (City(name="Oslo"), U + U, 2)
    assert (totals.usage, totals.model_calls) == (EARLIER + U + U, 6)


def test_a_structured_answer_that_never_validates_has_counted_its_calls_in_the_run() -> None:
    totals = Totals(usage=EARLIER, model_calls=1)
    model = ScriptedModel([respond("nope", usage=U)] * 2)
    with pytest.raises(ModelOutputError) as info:
        sync.run(structured_machine(model, City, "q", max_retries=1, totals=totals), NO_TOOLS)
    assert (info.value.usage, info.value.model_calls) == (U + U, 2)
    assert (totals.usage, totals.model_calls) == (EARLIER + U + U, 3)


def test_structured_attempts_are_numbered_from_zero_whatever_the_run_spent_before() -> None:
    """A journal matches model calls by (run, step): a re-plan's attempts keep their numbers."""
    events: list[object] = []
    model = ScriptedModel(["no", respond_structured({"name": "Oslo"})])
    machine = structured_machine(model, City, "q", totals=Totals(model_calls=7), run_id="r")
    sync.run(machine, NO_TOOLS, events.append)
    assert [e.step for e in events if isinstance(e, ModelCallStarted)] == [0, 1]


def test_a_text_call_adds_both_of_its_calls_to_the_run_numbered_by_it() -> None:
    totals = Totals(usage=EARLIER, model_calls=3)
    events: list[object] = []
    model = ScriptedModel([empty(), respond("Paris.", usage=U)])
    machine = text_machine(model, "q", totals=totals, run_id="r")
    response = sync.run(machine, NO_TOOLS, events.append)
    assert (response.message.text, response.usage) == ("Paris.", U)  # the reply as it came
    assert (totals.usage, totals.model_calls) == (EARLIER + U + U, 5)
    assert [e.step for e in events if isinstance(e, ModelCallStarted)] == [3, 4]


def test_ask_text_reports_what_both_calls_cost_when_it_had_to_ask_again() -> None:
    once = ask_text(ScriptedModel([respond("Paris.", usage=U)]), "q")
    assert once.usage == U
    twice = ask_text(ScriptedModel([empty(), respond("Paris.", usage=U)]), "q")
    assert (twice.message.text, twice.usage) == ("Paris.", U + U)


# -- one nudge after an empty reply --------------------------------------------------------


@pytest.mark.parametrize(
    ("ask", "note"),
    [
        (
            lambda m: ReActLoop(m, [add]).run("q"),
            "Your reply was empty. Answer the task, or call a tool.",
        ),
        (lambda m: ReActLoop(m, []).run("q"), "Your reply was empty. Answer the task."),
        (lambda m: ask_text(m, "q"), "Your reply was empty. Answer the task."),
    ],
    ids=["react", "react-without-tools", "text"],
)
def test_react_and_a_text_call_nudge_an_empty_reply_alike(ask, note) -> None:
    blank = ScriptedModel([empty(Text(" ")), "Paris."])
    ask(blank)
    (nudged,) = blank.requests[1].messages  # nothing to keep: the note joins the task
    assert nudged.content == (Text("q"), Text(note))

    thought = Thinking("hmm", "sig")
    thinking = ScriptedModel([empty(thought), "Paris."])
    ask(thinking)
    sent = thinking.requests[1].messages  # the thinking goes back, then the note
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert (sent[1].content, sent[2].content) == ((thought,), (Text(note),))
    assert len(thinking.requests[0].messages) == 1  # what was sent first stays as it was
