"""ReActLoop: its stops, its limits, its transcript rules, and the approval pause."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    Event,
    Message,
    ModelError,
    ReActLoop,
    ReActResult,
    StepLimitExceeded,
    ToolCall,
    Usage,
    tool,
    validate_transcript,
)
from agentloops.testing import ScriptedModel, respond, use_tools

U = Usage(input_tokens=50, output_tokens=10)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool(requires_approval=True, read_only=False)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_steps": 0}, "max_steps must be >= 1, got 0"),
        ({"max_parallel_tools": 0}, "max_parallel_tools must be >= 1"),
        ({"max_total_tokens": 0}, "max_total_tokens must be >= 1"),
        ({"max_repeats": 1}, "max_repeats must be >= 2 or None"),
    ],
)
def test_bad_limits(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ReActLoop(ScriptedModel([]), **options)


def test_parallel_calls_run_at_once_and_come_back_in_order() -> None:
    started: list[str] = []
    both = threading.Barrier(2, timeout=5)  # both calls must be running at the same time

    @tool
    def wait(name: str) -> str:
        """Wait for the other call."""
        started.append(name)
        both.wait()
        return name

    model = ScriptedModel([use_tools(("wait", {"name": "a"}), ("wait", {"name": "b"})), "done"])
    result = ReActLoop(model, [wait]).run("go")
    (results,) = [m for m in result.messages if m.tool_results]
    assert [r.content for r in results.tool_results] == ["a", "b"]
    assert result.tool_calls == 2 and sorted(started) == ["a", "b"]


def echo_call(text: str = "x", **kw: Any) -> Any:
    return use_tools(("echo", {"text": text}), **kw)


@pytest.mark.parametrize(
    ("script", "options", "stop", "detail"),
    [
        (["hi"], {}, "answered", "end_turn"),
        ([echo_call("1"), echo_call("2")], {"max_steps": 2}, "max_steps", "max_steps=2 reached"),
        ([echo_call(usage=U), "-"], {"max_total_tokens": 60}, "budget", "after 60 tokens"),
        ([echo_call() for _ in range(3)], {"max_repeats": 3}, "stalled", "max_repeats=3"),
        ([respond("no", stop_reason="refusal")], {}, "refused", "refusal"),
        ([echo_call(stop_reason="refusal")], {}, "refused", "refusal"),
        ([respond("cut", stop_reason="max_tokens")], {}, "max_tokens", "max_tokens"),
    ],
)
def test_stop_reasons(script: list[Any], options: dict[str, Any], stop: str, detail: str) -> None:
    result = ReActLoop(ScriptedModel(script), [echo], **options).run("task")
    assert result.stop_reason == stop and detail in result.detail


def test_raise_for_stop_raises_the_matching_error_with_the_result() -> None:
    result = ReActLoop(
        ScriptedModel([use_tools(("echo", {"text": "x"}))]), [echo], max_steps=1
    ).run("t")
    with pytest.raises(StepLimitExceeded, match="max_steps=1") as info:
        result.raise_for_stop()
    assert info.value.result is result


def test_a_cut_tool_call_is_never_run() -> None:
    ran: list[str] = []

    @tool
    def record(text: str) -> str:
        """Record the text."""
        ran.append(text)
        return text

    model = ScriptedModel([use_tools(("record", {"text": "x"}), stop_reason="max_tokens"), "ok"])
    result = ReActLoop(model, [record]).run("go")
    assert ran == [] and result.answer == "ok"
    (cut,) = model.requests[1].messages[-1].tool_results
    assert cut.is_error and "cut off" in cut.content


def test_pause_turn_is_sent_back_to_continue() -> None:
    model = ScriptedModel([respond("thinking...", stop_reason="pause_turn"), "done"])
    result = ReActLoop(model).run("go")
    assert result.answer == "done" and result.model_calls == 2


def test_answer_at_limit_makes_one_last_call_without_tools() -> None:
    model = ScriptedModel([use_tools(("echo", {"text": "x"})), use_tools(("echo", {"text": "y"}))])
    result = ReActLoop(model, [echo], max_steps=1, answer_at_limit=True).run("go")
    assert model.requests[-1].tool_choice == "none"
    assert "Answer now" in model.requests[-1].messages[-1].content[-1].text  # type: ignore[union-attr]
    assert result.stop_reason == "max_steps"
    assert result.messages[-1].tool_results[0].content.startswith("not run: tools are disabled")


def test_reused_call_ids_are_repaired_so_every_call_is_answered() -> None:
    same = ToolCall("dup", "echo", {"text": "x"})
    # validate=False: the fake keys turns by call id, which this model reuses on purpose
    model = ScriptedModel([use_tools(same, same), use_tools(same), "done"], validate=False)
    result = ReActLoop(model, [echo], max_repeats=None).run("go")
    validate_transcript(result.messages)
    ids = [c.id for m in result.messages for c in m.tool_calls]
    assert ids == ["dup", "dup_2", "dup_3"] and result.answer == "done"


def test_a_provider_error_keeps_the_partial_run() -> None:
    model = ScriptedModel(
        [use_tools(("echo", {"text": "x"})), ModelError("overloaded", status=529)]
    )
    with pytest.raises(ModelError) as info:
        ReActLoop(model, [echo]).run("go")
    partial = info.value.result
    assert (partial.stop_reason, partial.tool_calls, partial.model_calls) == ("error", 1, 1)


def test_run_continues_a_transcript_that_ends_on_a_user_turn() -> None:
    loop = ReActLoop(ScriptedModel(["a", "b"]))
    first = loop.run("q1")
    assert loop.run([*first.messages, Message.user("q2")]).answer == "b"
    with pytest.raises(ConfigurationError, match="must end on a user turn"):
        loop.run(first.messages)


def test_events_cover_the_run() -> None:
    events: list[Event] = []
    model = ScriptedModel([use_tools(("echo", {"text": "x"}), usage=U), "done"])
    ReActLoop(model, [echo], on_event=events.append).run("go", run_id="r1")
    names = [type(e).__name__ for e in events]
    assert names == [
        "RunStarted", "ModelCallStarted", "ModelCallFinished", "ToolCallStarted",
        "ToolCallFinished", "ModelCallStarted", "ModelCallFinished", "RunFinished",
    ]  # fmt: skip
    assert {e.run_id for e in events} == {"r1"}
    assert events[-1].usage == U  # type: ignore[attr-defined]


def paused_run(**options: Any) -> tuple[ReActLoop, ReActResult, ScriptedModel]:
    model = ScriptedModel([use_tools(("pay", {"amount": 5}), ("echo", {"text": "x"})), "finished"])
    loop = ReActLoop(model, [pay, echo], **options)
    return loop, loop.run("pay 5"), model


@pytest.mark.parametrize(("approve", "seen"), [(True, "paid 5"), (False, "denied")])
def test_approval_pause_and_resume(approve: bool, seen: str) -> None:
    events: list[Event] = []
    loop, paused, model = paused_run(on_event=events.append)
    assert paused.stop_reason == "approval_required" and "ApprovalRequested" in {
        type(e).__name__ for e in events
    }
    (call,) = paused.pending_approvals
    assert [r.content for r in paused.held_results] == ["x"]  # the other call already ran
    restored = ReActResult.from_state(json.loads(json.dumps(paused.to_state())))
    assert restored == paused
    done = loop.resume(restored, {call.id: approve})
    assert done.answer == "finished"
    results = model.requests[-1].messages[-1].tool_results
    assert results[0].content.startswith(seen) and results[1].content == "x"
    with pytest.raises(ConfigurationError, match="already resumed"):
        loop.resume(paused, {call.id: True})


def test_resume_refuses_what_does_not_match_the_pause() -> None:
    loop, paused, _ = paused_run()
    (call,) = paused.pending_approvals
    with pytest.raises(ConfigurationError, match="no pending call with id"):
        loop.resume(paused, {call.id: True, "other": True})
    with pytest.raises(ConfigurationError, match="no decision for pending calls"):
        loop.resume(paused, {})
    with pytest.raises(ConfigurationError, match="only a paused run can resume"):
        loop.resume(ReActLoop(ScriptedModel(["a"])).run("q"), {})


@pytest.mark.parametrize(("decision", "content"), [("deny", "denied"), ("allow", "x")])
def test_an_approval_policy_decides_each_call(decision: str, content: str) -> None:
    model = ScriptedModel([use_tools(("echo", {"text": "x"})), "ok"])
    ReActLoop(model, [echo], approval=lambda call: decision).run("go")  # type: ignore[arg-type,return-value]
    assert model.requests[-1].messages[-1].tool_results[0].content.startswith(content)


def test_a_policy_must_answer_allow_deny_or_ask() -> None:
    model = ScriptedModel([use_tools(("echo", {"text": "x"}))])
    with pytest.raises(ConfigurationError, match="approval policy returned 'maybe'"):
        ReActLoop(model, [echo], approval=lambda call: "maybe").run("go")  # type: ignore[arg-type,return-value]
