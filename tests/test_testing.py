"""The test doubles: scripts run out loudly, and every request is a protocol check."""

from __future__ import annotations

import pytest

from agentloops import (
    Message,
    ModelRequest,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    TranscriptError,
)
from agentloops.testing import FunctionModel, ScriptedModel, ScriptExhausted, respond, use_tools


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system="", messages=list(messages))


def test_script_items_strings_responses_callables_and_exceptions() -> None:
    model = ScriptedModel(["a", respond("b"), lambda req: f"c{len(req.messages)}", ValueError("d")])
    ask = request(Message.user("q"))
    assert [model.complete(ask).message.text for _ in range(3)] == ["a", "b", "c1"]
    assert model.remaining == 1
    with pytest.raises(ValueError, match="d"):
        model.complete(ask)
    with pytest.raises(ScriptExhausted, match="the script has 4 items and all were used; call 5"):
        model.complete(ask)
    model.assert_complete()
    assert model.calls == 5


def test_assert_complete_names_the_unused_items() -> None:
    model = ScriptedModel(["a", "b"])
    model.complete(request(Message.user("q")))
    with pytest.raises(AssertionError, match="1 of 2 scripted responses were never used"):
        model.assert_complete()


def test_builders() -> None:
    thinking = Thinking("hm", "sig")
    turn = use_tools(ToolCall("mine", "t", {}), ("t", {"x": 1}), text="using", thinking=thinking)
    assert turn.stop_reason == "tool_use" and turn.message.content[:2] == (thinking, Text("using"))
    assert turn.message.tool_calls[0].id == "mine"
    assert respond("x", thinking=RedactedThinking("r")).message.content[0] == RedactedThinking("r")


def test_a_bad_transcript_is_refused_unless_validation_is_off() -> None:
    bad = request(Message.assistant("hi"))
    with pytest.raises(TranscriptError):
        FunctionModel(lambda r: "ok").complete(bad)
    assert FunctionModel(lambda r: "ok", validate=False).complete(bad).message.text == "ok"


@pytest.mark.parametrize(
    "first", [Thinking("hm", "sig"), RedactedThinking("data")], ids=["thinking", "redacted"]
)
def test_an_altered_assistant_turn_is_refused(first: object) -> None:
    turn = use_tools(ToolCall("c1", "t", {}), thinking=first)  # type: ignore[arg-type]
    model = ScriptedModel([turn, "done", "again"])
    asked = Message.user("q")
    model.complete(request(asked))
    answer = Message("user", (ToolResult("c1", "ok"),))
    model.complete(request(asked, turn.message, answer))  # echoed unchanged: fine
    dropped = Message("assistant", turn.message.content[1:])
    with pytest.raises(TranscriptError, match="altered or lost blocks"):
        model.complete(request(asked, dropped, answer))


def test_a_turn_with_duplicate_ids_is_not_remembered() -> None:
    twice = use_tools(ToolCall("c1", "t", {}), ToolCall("c1", "t", {}))
    model = FunctionModel(lambda r: twice)
    assert model.complete(request(Message.user("q"))) is twice
