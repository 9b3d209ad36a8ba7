"""Messages: dict round trips, and the transcript rules the providers enforce."""

from __future__ import annotations

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
from agentloops.messages import block_from_dict, block_to_dict, message_from_dict, message_to_dict

CALL = ToolCall("c1", "add", {"a": 1})
CALL2 = ToolCall("c2", "add", {"a": 2})


def user(*blocks: object) -> Message:
    return Message("user", tuple(blocks))  # type: ignore[arg-type]


def assistant(*blocks: object) -> Message:
    return Message("assistant", tuple(blocks))  # type: ignore[arg-type]


def test_every_block_round_trips_through_a_dict() -> None:
    message = assistant(Thinking("hm", "sig"), RedactedThinking("xyz"), Text("hi"), CALL)
    assert message_from_dict(message_to_dict(message)) == message
    result = ToolResult("c1", "2", is_error=True)
    assert block_from_dict(block_to_dict(result)) == result


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: block_to_dict("text"), TypeError),  # type: ignore[arg-type]
        (lambda: block_from_dict({"type": "image"}), ValueError),
        (lambda: message_from_dict({"role": "system", "content": []}), ValueError),
    ],
)
def test_malformed_records_are_refused(call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()  # type: ignore[operator]


def test_message_views() -> None:
    turn = assistant(Thinking("t", "s"), Text("a"), CALL, Text("b"))
    assert (turn.text, turn.tool_calls) == ("a\nb", [CALL])
    assert Message.assistant("x") == assistant(Text("x"))
    assert user(ToolResult("c1", "2"), Text("more")).tool_results == [ToolResult("c1", "2")]


VALID = [
    Message.user("add"),
    assistant(Text("calling"), CALL, CALL2),
    user(ToolResult("c1", "2"), ToolResult("c2", "3"), Text("go on")),
    assistant(Text("5")),
]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([], "empty"),
        ([Message.assistant("hi")], "start with a user turn"),
        ([Message.user("a"), Message.user("b")], "two user turns in a row"),
        ([Message.user("a"), assistant()], "no content"),
        ([Message.user(" ")], "empty text block"),
        ([user(Text("a"), CALL)], "tool calls or thinking in a user turn"),
        ([Message.user("a"), assistant(CALL), user(Text("x"), ToolResult("c1", "2"))], "before"),
        (
            [
                Message.user("a"),
                assistant(CALL),
                user(ToolResult("c1", "2"), ToolResult("c1", "2")),
            ],
            "answered twice",
        ),
        ([Message.user("a"), assistant(CALL), user(ToolResult("c9", "2"))], "unknown: ['c9']"),
        ([Message.user("a"), assistant(CALL), Message.user("no result")], "unanswered: ['c1']"),
        ([Message.user("a"), assistant(ToolResult("c1", "2"))], "tool result in an assistant turn"),
        ([Message.user("a"), assistant(Thinking("t", ""))], "without its signature"),
        (
            [Message.user("a"), assistant(CALL), user(ToolResult("c1", "2")), assistant(CALL)],
            "duplicate tool call id",
        ),
        ([Message.user("a"), assistant(CALL)], "tool calls without results"),
    ],
)
def test_transcript_rules(messages: list[Message], problem: str) -> None:
    with pytest.raises(TranscriptError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        validate_transcript(messages)


def test_valid_transcripts_pass() -> None:
    validate_transcript(VALID)
    validate_transcript([Message.user("a"), assistant(CALL)], allow_pending=True)
