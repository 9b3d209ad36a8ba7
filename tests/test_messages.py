import dataclasses
import pickle

import pytest

from agentloops import (
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    TranscriptError,
    validate_transcript,
)
from agentloops.messages import (
    _tool_result,
    _user_turn,
    block_from_dict,
    message_from_dict,
    message_to_dict,
)


def test_user_builder_text_and_tool_calls():
    m = Message.user("hi")
    assert m.role == "user" and m.text == "hi" and m.tool_calls == []
    a = Message(
        "assistant",
        (Thinking("t", "sig"), Text("a"), ToolCall("1", "f", {}), Text("b")),
    )
    assert a.text == "a\nb"
    assert [c.id for c in a.tool_calls] == ["1"]
    assert Message.assistant("x").role == "assistant"


def test_blocks_are_frozen_and_compare_by_value():
    assert Text("a") == Text("a")
    with pytest.raises(AttributeError):
        Text("a").text = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        (_tool_result("c1", "42", False), ToolResult("c1", "42")),
        (_tool_result("c2", "boom", True), ToolResult("c2", "boom", is_error=True)),
        (_user_turn((ToolResult("c1", "42"),)), Message("user", (ToolResult("c1", "42"),))),
        (_user_turn((Text("hi"),)), Message.user("hi")),
    ],
)
def test_hot_path_builders_make_the_same_frozen_records(built, expected):
    assert type(built) is type(expected) and built == expected
    assert hash(built) == hash(expected) and repr(built) == repr(expected)
    assert pickle.loads(pickle.dumps(built)) == expected
    for f in dataclasses.fields(expected):  # every field set, none writable
        assert getattr(built, f.name) == getattr(expected, f.name)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, f.name, None)


@pytest.mark.parametrize(
    "message",
    [
        Message.user("q"),
        Message(
            "assistant",
            (
                Thinking("why", "sig=="),
                RedactedThinking("opaque"),
                Text("x"),
                ToolCall("c1", "add", {"a": [1, {"b": 2}]}),
            ),
        ),
        Message("user", (ToolResult("c1", "3", True), Text("more"))),
    ],
)
def test_dict_round_trip(message):
    assert message_from_dict(message_to_dict(message)) == message


@pytest.mark.parametrize("bad", [{"type": "image"}, {"role": "system", "content": []}])
def test_malformed_records_raise_value_error(bad):
    with pytest.raises(ValueError):
        if "role" in bad:
            message_from_dict(bad)
        else:
            block_from_dict(bad)


def _tool_turn(*ids):
    return Message("assistant", tuple(ToolCall(i, "f", {}) for i in ids))


def _results(*ids):
    return Message("user", tuple(ToolResult(i, "ok") for i in ids))


def test_valid_transcript_passes():
    validate_transcript(
        [
            Message.user("q"),
            _tool_turn("a", "b"),
            Message("user", (ToolResult("b", "1"), ToolResult("a", "2"), Text("note"))),
            Message.assistant("done"),
        ]
    )


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([], "empty"),
        ([Message.assistant("x")], "start with a user"),
        ([Message.user("a"), Message.user("b")], "two user turns"),
        ([Message.user("q"), _tool_turn("a"), Message.user("no results")], "unanswered"),
        ([Message.user("q"), _tool_turn("a", "b"), _results("a")], "unanswered"),
        ([Message.user("q"), _tool_turn("a"), _results("a", "zzz")], "unknown"),
        ([Message.user("q"), _tool_turn("a"), _results("a", "a")], "answered twice"),
        (
            [
                Message.user("q"),
                _tool_turn("a"),
                Message("user", (Text("x"), ToolResult("a", "1"))),
            ],
            "text before",
        ),
        ([Message.user("q"), _tool_turn("a", "a"), _results("a")], "duplicate tool call id"),
        (
            [
                Message.user("q"),
                _tool_turn("a"),
                _results("a"),
                _tool_turn("a"),
                _results("a"),
            ],
            "duplicate tool call id",
        ),
        ([Message("user", (ToolResult("x", "1"),))], "do not match"),
        ([Message.user("q"), _tool_turn("a")], "without results"),
        ([Message("user", (Text(""),))], "empty text"),
        ([Message("user", ())], "no content"),
        ([Message.user("q"), Message("assistant", (Thinking("t", ""),))], "signature"),
        ([Message("user", (Thinking("t", "s"),))], "user turn"),
        ([Message.user("q"), Message("assistant", (ToolResult("a", "1"),))], "assistant turn"),
    ],
)
def test_invalid_transcripts(messages, fragment):
    with pytest.raises(TranscriptError, match=fragment):
        validate_transcript(messages)


def test_pending_calls_allowed_when_asked():
    messages = [Message.user("q"), _tool_turn("a")]
    validate_transcript(messages, allow_pending=True)


def test_block_to_dict_rejects_what_is_not_a_block():
    from agentloops.messages import block_to_dict

    with pytest.raises(TypeError, match="not a message block"):
        block_to_dict("text")  # type: ignore[arg-type]
