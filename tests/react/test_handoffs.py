"""Handoffs (`ReActLoop(..., handoffs=[...])`): a tool per target, the target continuing the
conversation as a sub-run whose answer ends the run, who answered, filters, chains, a cycle
of handoffs, the depth limit, a target that pauses for approval, and the mistakes refused
when the loop is built."""

from __future__ import annotations

from typing import Any

import pytest
from _subagents import USAGE, calls, results_of

from agentloops import (
    ConfigurationError,
    Handoff,
    HandoffCycle,
    MemoryStore,
    Message,
    ModelRequest,
    ModelResponse,
    ReWOOPipeline,
    Text,
    ToolCall,
    ToolResult,
    tool,
)
from agentloops.engine.runner import new_run_id
from agentloops.react import text_only
from agentloops.testing import FunctionModel, ScriptedModel, respond

SEEN: dict[str, list[list[Message]]] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    SEEN.clear()


def agent(name: str, answer: Any) -> FunctionModel:
    """A model that records each conversation it gets, and answers with `answer(request)`."""

    def reply(request: ModelRequest) -> ModelResponse:
        SEEN.setdefault(name, []).append(list(request.messages))
        found = answer(request)
        return respond(found, usage=USAGE) if isinstance(found, str) else found

    return FunctionModel(reply)


def hands_to(target: str, *others: ToolCall, text: str = "") -> Any:
    def answer(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.tool_results and any(r.is_error for r in last.tool_results):
            return f"could not hand over: {last.tool_results[-1].content[:60]}"
        blocks: tuple[Any, ...] = (ToolCall(f"h-{target}", f"transfer_to_{target}", {}), *others)
        if text:
            blocks = (Text(text), *blocks)
        return ModelResponse(Message("assistant", blocks), "tool_use", USAGE, "scripted")

    return answer


def test_the_target_continues_the_conversation_and_its_answer_ends_the_run(ReActLoop: Any) -> None:
    billing = ReActLoop(agent("billing", lambda r: "Refund issued."), [], name="billing")
    triage = ReActLoop(agent("triage", hands_to("billing")), [], handoffs=[billing], name="triage")
    assert [s.name for s in triage.tools.specs()] == ["transfer_to_billing"]
    result = triage.run("I was charged twice.", run_id="t")
    assert (result.answer, result.stop_reason, result.answered_by) == (
        "Refund issued.",
        "answered",
        "billing",
    )
    (seen,) = SEEN["billing"]  # the whole conversation, the handoff's turn included
    assert seen[0].text == "I was charged twice." and seen[1].tool_calls[0].name == (
        "transfer_to_billing"
    )
    assert seen[2].tool_results[0].content.startswith("Transferred: billing continues")
    assert result.messages[-1] == Message.assistant("Refund issued.")
    assert result.messages[:3] == seen
    assert result.model_calls == 2 and result.usage.total_tokens == 30
    (run,) = result.subruns
    assert (run.name, run.run_id, run.answered_by) == (
        "transfer_to_billing",
        "t:h-billing",
        "billing",
    )


def test_a_loop_that_answers_itself_says_so(ReActLoop: Any) -> None:
    billing = ReActLoop(agent("billing", lambda r: "x"), [], name="billing")
    triage = ReActLoop(ScriptedModel(["Hello."]), [], handoffs=[billing], name="triage")
    result = triage.run("Hi")
    assert (result.answer, result.answered_by, result.subruns) == ("Hello.", "triage", [])


def test_an_input_filter_chooses_what_of_the_conversation_the_target_gets(ReActLoop: Any) -> None:
    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order}: shipped"

    look = (Text("Let me check."), ToolCall("l1", "lookup", {"order": "7"}))
    hand = (Text("Handing over."), ToolCall("h1", "transfer_to_billing", {}))
    script = ScriptedModel(
        [ModelResponse(Message("assistant", turn), "tool_use", USAGE) for turn in (look, hand)]
    )
    billing = ReActLoop(agent("billing", lambda r: "Billing here."), [], name="billing")
    triage = ReActLoop(
        script, [lookup], handoffs=[Handoff(billing, input_filter=text_only)], name="triage"
    )
    result = triage.run("Where is order 7?")
    assert result.answer == "Billing here."
    (seen,) = SEEN["billing"]
    assert seen == [Message.user("Where is order 7?")]  # text only, ending on a user turn


def test_text_only_keeps_each_turns_text_and_ends_on_a_user_turn() -> None:
    messages = [
        Message.user("a"),
        Message("assistant", (Text("b"), ToolCall("c", "x", {}))),
        Message("user", (ToolResult("c", "r"), Text("d"))),
        Message.assistant("e"),
    ]
    assert text_only(messages) == [
        Message.user("a"),
        Message.assistant("b"),
        Message.user("d"),
    ]
    assert text_only([Message.assistant("x")]) == [Message.user("(the conversation had no text)")]


def test_other_calls_of_a_handoffs_turn_are_not_run(ReActLoop: Any) -> None:
    ran: list[str] = []

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(order)
        return "x"

    refunds = ReActLoop(agent("refunds", lambda r: "Refunds here."), [], name="refunds")
    billing = ReActLoop(agent("billing", lambda r: "Billing here."), [], name="billing")
    both = hands_to(
        "billing",
        ToolCall("h2", "transfer_to_refunds", {}),
        ToolCall("l1", "lookup", {"order": "7"}),
    )
    triage = ReActLoop(agent("triage", both), [lookup], handoffs=[billing, refunds])
    result = triage.run("Help")
    assert result.answered_by == "billing" and ran == [] and "refunds" not in SEEN
    handed = result.messages[2].tool_results
    assert [(r.call_id, r.is_error) for r in handed] == [
        ("h-billing", False),
        ("h2", True),
        ("l1", True),
    ]
    assert handed[1].content == "not run: the conversation was handed over to billing in this turn"


def test_a_chain_of_handoffs_ends_with_the_last_ones_answer(ReActLoop: Any) -> None:
    refunds = ReActLoop(agent("refunds", lambda r: "Refunded."), [], name="refunds")
    billing = ReActLoop(
        agent("billing", hands_to("refunds")), [], handoffs=[refunds], name="billing"
    )
    triage = ReActLoop(agent("triage", hands_to("billing")), [], handoffs=[billing], name="triage")
    result = triage.run("Refund me.", run_id="t")
    assert (result.answer, result.answered_by) == ("Refunded.", "refunds")
    assert result.model_calls == 3
    assert result.subruns[0].answered_by == "refunds"


def test_a_cycle_of_handoffs_stops_with_a_typed_reason(ReActLoop: Any) -> None:
    triage = ReActLoop(agent("triage", hands_to("billing")), [], name="triage")
    billing = ReActLoop(agent("billing", hands_to("triage")), [], handoffs=[triage], name="billing")
    triage.__init__(  # type: ignore[misc]  # give triage its handoff now that billing exists
        triage.model, [], handoffs=[billing], name="triage"
    )
    result = triage.run("Round and round.", run_id="t")
    assert result.stop_reason == "handoff_cycle" and result.answer == ""
    assert (
        "a cycle of handoffs: the run > transfer_to_billing > transfer_to_triage" in result.detail
    )
    assert result.model_calls == 2
    with pytest.raises(HandoffCycle, match="cycle of handoffs"):
        result.raise_for_stop()


def test_a_handoff_past_max_depth_is_refused_and_the_model_goes_on(ReActLoop: Any) -> None:
    refunds = ReActLoop(agent("refunds", lambda r: "Refunded."), [], name="refunds")
    billing = ReActLoop(
        agent("billing", hands_to("refunds")), [], handoffs=[refunds], name="billing"
    )
    triage = ReActLoop(
        agent("triage", hands_to("billing")), [], handoffs=[billing], name="triage", max_depth=1
    )
    result = triage.run("Refund me.")
    assert result.answered_by == "billing" and "refunds" not in SEEN
    assert result.answer.startswith("could not hand over: not run: a sub-run here would be 2")


@pytest.mark.parametrize("durable", [False, True])
def test_a_target_that_pauses_pauses_the_run_and_ends_it_once_resumed(
    durable: bool, ReActLoop: Any
) -> None:
    paid: list[str] = []

    @tool(read_only=False, requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        paid.append(str(amount))
        return f"refunded {amount}"

    def billing_answer(request: ModelRequest) -> Any:
        seen = results_of(request.messages)
        if seen and seen[-1].startswith("refunded"):
            return f"Done: {seen[-1]}."
        return calls(ToolCall("r1", "refund", {"amount": 20}))

    store = MemoryStore() if durable else None

    def build() -> Any:
        billing = ReActLoop(agent("billing", billing_answer), [refund], name="billing")
        return ReActLoop(
            agent("triage", hands_to("billing")), [], handoffs=[billing], name="triage", store=store
        )

    paused = build().run("Refund 20.", run_id=new_run_id())
    assert paused.stop_reason == "approval_required"
    assert [c.id for c in paused.pending_approvals] == ["r1"]
    done = build().resume(paused.run_id if durable else paused, {"r1": True})
    assert (done.answer, done.answered_by, paid) == ("Done: refunded 20.", "billing", ["20"])
    assert done.messages[-1] == Message.assistant("Done: refunded 20.")
    assert done.model_calls == 3


def test_a_handoff_target_needs_a_name_and_a_conversation() -> None:
    from agentloops import ReActLoop

    nameless = ReActLoop(ScriptedModel([]), [])
    with pytest.raises(ConfigurationError, match="a handoff target needs a name"):
        ReActLoop(ScriptedModel([]), [], handoffs=[nameless])
    pipeline = ReWOOPipeline(ScriptedModel([]), [])
    with pytest.raises(
        ConfigurationError, match="give a ReWOO or Plan-and-Execute loop as an agent"
    ):
        ReActLoop(ScriptedModel([]), [], handoffs=[Handoff(pipeline, name="facts")])
    with pytest.raises(ConfigurationError, match="input_filter must be callable"):
        ReActLoop(ScriptedModel([]), [], handoffs=[Handoff(nameless, name="x", input_filter=3)])  # type: ignore[arg-type]


def test_handoffs_leave_the_callers_registry_as_it_was() -> None:
    from agentloops import ReActLoop, ToolRegistry

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return "x"

    registry = ToolRegistry([lookup])
    billing = ReActLoop(ScriptedModel([]), [], name="billing")
    triage = ReActLoop(
        ScriptedModel([]), registry, handoffs=[Handoff(billing, description="Money.")]
    )
    assert registry.names == ["lookup"]
    assert triage.tools.names == ["lookup", "transfer_to_billing"]
    assert triage.tools.get("transfer_to_billing").description == "Money."  # type: ignore[union-attr]
