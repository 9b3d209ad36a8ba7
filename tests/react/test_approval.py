"""Human approval in ReActLoop: pause, approve, deny, policies, and resuming elsewhere."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentloops import (
    ApprovalRequested,
    ApprovalRequired,
    ConfigurationError,
    ReActLoop,
    ReActResult,
    Text,
    ToolCall,
    ToolResult,
    tool,
    validate_transcript,
)
from agentloops.testing import ScriptedModel, use_tools


def make_tools() -> tuple[list[object], dict[str, list[dict[str, object]]]]:
    """A read-only `lookup`, and a `send` that needs approval; each records its calls."""
    ran: dict[str, list[dict[str, object]]] = {"lookup": [], "send": []}

    @tool
    def lookup(key: str) -> str:
        """Look a value up."""
        ran["lookup"].append({"key": key})
        return f"value of {key}"

    @tool(read_only=False, requires_approval=True)
    def send(to: str, body: str) -> str:
        """Send a message."""
        ran["send"].append({"to": to, "body": body})
        return f"sent to {to}"

    return [lookup, send], ran


def results_sent(model: ScriptedModel, index: int) -> list[ToolResult]:
    """The tool results in the last message of request `index`."""
    return model.requests[index].messages[-1].tool_results


def paused_run(
    ReActLoop: type[ReActLoop], **loop_options: object
) -> tuple[ReActResult, ReActLoop, ScriptedModel, dict]:
    tools, ran = make_tools()
    model = ScriptedModel(
        [use_tools(("send", {"to": "ann", "body": "hi"}), text="I will send it."), "Sent."]
    )
    loop = ReActLoop(model, tools, **loop_options)  # type: ignore[arg-type]
    return loop.run("Tell Ann hi."), loop, model, ran


def test_a_call_needing_approval_pauses_without_running(ReActLoop) -> None:
    result, _, model, ran = paused_run(ReActLoop)
    assert result.stop_reason == "approval_required"
    assert [(c.name, c.args) for c in result.pending_approvals] == [
        ("send", {"to": "ann", "body": "hi"})
    ]
    assert ran["send"] == []
    assert result.answer == ""  # the turn's preamble is not an answer
    assert result.held_results == []
    assert result.tool_calls == 0
    assert model.calls == 1
    validate_transcript(result.messages, allow_pending=True)
    with pytest.raises(ApprovalRequired) as caught:
        result.raise_for_stop()
    assert caught.value.result is result


def test_approved_call_runs_once_with_the_arguments_shown(ReActLoop) -> None:
    result, loop, model, ran = paused_run(ReActLoop)
    call = result.pending_approvals[0]
    final = loop.resume(result, {call.id: True})
    assert final.stop_reason == "answered"
    assert final.answer == "Sent."
    assert ran["send"] == [{"to": "ann", "body": "hi"}]
    assert results_sent(model, 1) == [ToolResult(call.id, "sent to ann", False)]
    assert final.tool_calls == 1
    assert final.model_calls == 2
    model.assert_complete()


def test_denied_call_never_runs_and_the_model_is_told(ReActLoop) -> None:
    result, loop, model, ran = paused_run(ReActLoop)
    call = result.pending_approvals[0]
    final = loop.resume(result, {call.id: False})
    assert final.stop_reason == "answered"
    assert ran["send"] == []
    [sent] = results_sent(model, 1)
    assert sent.call_id == call.id
    assert sent.is_error
    assert "denied" in sent.content
    assert final.tool_calls == 0


def test_mixed_turn_runs_the_allowed_call_now_and_holds_its_result(ReActLoop) -> None:
    tools, ran = make_tools()
    model = ScriptedModel(
        [use_tools(("lookup", {"key": "ann"}), ("send", {"to": "ann", "body": "hi"})), "Done."]
    )
    loop = ReActLoop(model, tools)
    result = loop.run("Look Ann up, then tell her hi.")
    assert result.stop_reason == "approval_required"
    assert [c.name for c in result.pending_approvals] == ["send"]
    assert ran["lookup"] == [{"key": "ann"}]
    assert [r.content for r in result.held_results] == ["value of ann"]
    lookup_call, send_call = result.messages[-1].tool_calls
    final = loop.resume(result, {send_call.id: True})
    assert final.stop_reason == "answered"
    assert len(ran["lookup"]) == 1  # the allowed call did not run again
    assert len(ran["send"]) == 1
    # Both results in one user message, in the order the model asked for them.
    assert [r.call_id for r in results_sent(model, 1)] == [lookup_call.id, send_call.id]


@pytest.mark.parametrize(
    ("decision", "runs", "pauses", "is_error"),
    [("allow", 1, False, False), ("deny", 0, False, True), ("ask", 0, True, None)],
)
def test_policy_decides_per_call(
    decision: str, runs: int, pauses: bool, is_error: bool | None, ReActLoop
) -> None:
    tools, ran = make_tools()
    seen: list[ToolCall] = []

    def policy(call: ToolCall) -> str:
        seen.append(call)
        return decision

    model = ScriptedModel([use_tools(("lookup", {"key": "k"})), "ok"])
    result = ReActLoop(model, tools, approval=policy).run("Look k up.")  # type: ignore[arg-type]
    assert [c.name for c in seen] == ["lookup"]
    assert len(ran["lookup"]) == runs
    assert (result.stop_reason == "approval_required") is pauses
    if not pauses:
        [sent] = results_sent(model, 1)
        assert sent.is_error is is_error
        if is_error:
            assert "denied" in sent.content


@pytest.mark.parametrize(
    ("decision", "stop"), [("allow", "approval_required"), ("deny", "answered")]
)
def test_a_policy_cannot_downgrade_requires_approval(decision: str, stop: str, ReActLoop) -> None:
    tools, ran = make_tools()
    model = ScriptedModel([use_tools(("send", {"to": "a", "body": "b"})), "ok"])
    loop = ReActLoop(model, tools, approval=lambda call: decision)  # type: ignore[arg-type,return-value]
    result = loop.run("Send it.")
    assert result.stop_reason == stop
    assert ran["send"] == []


def test_a_policy_answer_outside_allow_deny_ask_is_a_configuration_error(ReActLoop) -> None:
    tools, _ = make_tools()
    model = ScriptedModel([use_tools(("lookup", {"key": "k"}))])
    events: list[object] = []
    loop = ReActLoop(model, tools, approval=lambda call: "yes", on_event=events.append)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="'yes'") as caught:
        loop.run("Look k up.")
    # Raised mid-run: the error carries what was done, and the run's events are closed.
    partial = caught.value.result
    assert isinstance(partial, ReActResult)
    assert (partial.stop_reason, partial.model_calls) == ("error", 1)
    assert type(events[-1]).__name__ == "RunFinished" and events[-1].stop_reason == "error"  # type: ignore[attr-defined]


def test_a_paused_turn_whose_other_results_went_missing_is_refused(ReActLoop) -> None:
    tools, ran = make_tools()
    model = ScriptedModel([use_tools(("lookup", {"key": "a"}), ("send", {"to": "a", "body": "x"}))])
    loop = ReActLoop(model, tools)
    state = loop.run("go").to_state()
    state["held_results"] = []  # e.g. a hand-edited or truncated checkpoint
    paused = ReActResult.from_state(state)
    with pytest.raises(ConfigurationError, match="neither held nor pending"):
        loop.resume(paused, {paused.pending_approvals[0].id: True})
    assert ran["send"] == []


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ({"nope": True}, "no pending call with id"),
        ({}, "no decision for pending calls"),
        ("pending-and-unknown", "no pending call with id"),
        ("pending-as-string", "a decision is True, False, .approve., .deny."),
    ],
)
def test_bad_decisions_are_configuration_errors(decisions: object, message: str, ReActLoop) -> None:
    result, loop, model, ran = paused_run(ReActLoop)
    call_id = result.pending_approvals[0].id
    if decisions == "pending-and-unknown":
        decisions = {call_id: True, "other": False}
    elif decisions == "pending-as-string":
        decisions = {call_id: "no"}  # truthy, and must never approve
    with pytest.raises(ConfigurationError, match=message):
        loop.resume(result, decisions)  # type: ignore[arg-type]
    assert ran["send"] == []
    assert model.calls == 1


def test_only_a_paused_result_resumes_and_only_once(ReActLoop) -> None:
    result, loop, _, ran = paused_run(ReActLoop)
    decisions = {result.pending_approvals[0].id: True}
    final = loop.resume(result, decisions)
    with pytest.raises(ConfigurationError, match="already resumed"):
        loop.resume(result, decisions)
    with pytest.raises(ConfigurationError, match="only a paused run"):
        loop.resume(final, decisions)
    assert len(ran["send"]) == 1


def test_two_pending_calls_answered_in_reverse_order_each_get_their_own_decision(ReActLoop) -> None:
    tools, ran = make_tools()
    model = ScriptedModel(
        [
            use_tools(("send", {"to": "ann", "body": "1"}), ("send", {"to": "bob", "body": "2"})),
            "ok",
        ]
    )
    loop = ReActLoop(model, tools)
    result = loop.run("Send both.")
    first, second = result.pending_approvals
    loop.resume(result, {second.id: False, first.id: True})
    assert ran["send"] == [{"to": "ann", "body": "1"}]
    sent = results_sent(model, 1)
    assert [(r.call_id, r.is_error) for r in sent] == [(first.id, False), (second.id, True)]


def test_a_pending_call_whose_arguments_changed_is_refused(ReActLoop) -> None:
    result, loop, _, ran = paused_run(ReActLoop)
    call = result.pending_approvals[0]
    forged = ToolCall(call.id, call.name, {"to": "mallory", "body": "hi"})
    tampered = dataclasses.replace(result, pending_approvals=[forged])
    with pytest.raises(ConfigurationError, match="do not match"):
        loop.resume(tampered, {call.id: True})
    assert ran["send"] == []


def test_resume_from_a_json_round_trip_in_a_fresh_loop(ReActLoop) -> None:
    result, _, _, ran = paused_run(ReActLoop)
    state = json.loads(json.dumps(result.to_state()))
    restored = ReActResult.from_state(state)
    assert restored.pending_approvals == result.pending_approvals
    assert restored.messages == result.messages
    tools, ran_here = make_tools()
    model = ScriptedModel(["Sent."])
    final = ReActLoop(model, tools).resume(restored, {restored.pending_approvals[0].id: True})
    assert final.answer == "Sent."
    assert ran_here["send"] == [{"to": "ann", "body": "hi"}]
    assert ran["send"] == []
    assert final.model_calls == 2  # counts carry over from the paused run


def test_pause_emits_approval_requested(ReActLoop) -> None:
    events: list[object] = []
    result, *_ = paused_run(ReActLoop, on_event=events.append)
    [asked] = [e for e in events if isinstance(e, ApprovalRequested)]
    assert asked.calls == result.pending_approvals
    assert asked.run_id == result.run_id


def test_held_results_survive_the_round_trip(ReActLoop) -> None:
    tools, _ = make_tools()
    model = ScriptedModel([use_tools(("lookup", {"key": "x"}), ("send", {"to": "a", "body": "b"}))])
    result = ReActLoop(model, tools).run("Go.")
    restored = ReActResult.from_state(json.loads(json.dumps(result.to_state())))
    assert (
        restored.held_results
        == result.held_results
        == [ToolResult(result.messages[-1].tool_calls[0].id, "value of x", False)]
    )


CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from agentloops import ReActLoop, ReActResult, tool
    from agentloops.testing import ScriptedModel

    ran = []

    @tool(read_only=False, requires_approval=True)
    def send(to: str, body: str) -> str:
        '''Send a message.'''
        ran.append({"to": to, "body": body})
        return f"sent to {to}"

    state = Path(sys.argv[1])
    paused = ReActResult.from_state(json.loads(state.read_text()))
    model = ScriptedModel(["Sent from the child."])
    final = ReActLoop(model, [send]).resume(paused, {paused.pending_approvals[0].id: True})
    state.write_text(json.dumps(final.to_state()))
    print(json.dumps({"answer": final.answer, "ran": ran, "stop": final.stop_reason}))
    """
)


def test_resume_in_another_process_from_the_results_state(tmp_path: Path, ReActLoop) -> None:
    result, _, _, ran = paused_run(ReActLoop)
    state = tmp_path / "paused.json"  # any storage of the caller's: the state is JSON
    state.write_text(json.dumps(result.to_state()))
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(state)], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    out = json.loads(child.stdout)
    assert out == {
        "answer": "Sent from the child.",
        "ran": [{"to": "ann", "body": "hi"}],
        "stop": "answered",
    }
    assert ran["send"] == []  # it ran in the child, once
    saved = ReActResult.from_state(json.loads(state.read_text()))
    assert saved.stop_reason == "answered"
    assert saved.messages[-1].content == (Text("Sent from the child."),)
