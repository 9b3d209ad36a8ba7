"""Evaluator: a fresh-context verdict on a draft, from the task, draft and evidence only."""

from __future__ import annotations

from typing import Any

import pytest

from agentloops import ConfigurationError, ModelOutputError, Usage, Verdict
from agentloops.evaluator import DEFAULT_CRITERIA, EVALUATOR_SYSTEM
from agentloops.testing import ScriptedModel, respond_structured


def verdict(label: str, *reasons: str) -> Any:
    return respond_structured({"verdict": label, "reasons": list(reasons)}, usage=Usage(7, 2))


def test_one_user_message_holds_task_draft_and_evidence_and_nothing_else(Evaluator) -> None:
    model = ScriptedModel([verdict("pass", "every figure is in the evidence")])
    result = Evaluator(model).evaluate(
        "What did ACME close at?", "ACME closed at 42 USD.", ["quote: ACME close 42 USD"]
    )
    assert result == Verdict(verdict="pass", reasons=["every figure is in the evidence"])
    [request] = model.requests
    [message] = request.messages
    assert message.role == "user"
    assert "What did ACME close at?" in message.text
    assert "ACME closed at 42 USD." in message.text
    assert "quote: ACME close 42 USD" in message.text
    assert request.tools == []
    assert request.system == EVALUATOR_SYSTEM
    assert EVALUATOR_SYSTEM.startswith("You are the evaluator of an agent's draft answer.")
    assert request.output is not None
    assert set(request.output.schema["properties"]) == {"verdict", "reasons"}


@pytest.mark.parametrize("label", ["pass", "fail", "needs_human"])
def test_each_verdict_comes_back_with_its_cost(label: str, Evaluator) -> None:
    result = Evaluator(ScriptedModel([verdict(label, "r")])).evaluate("t", "d")
    assert result.verdict == label
    assert result.passed is (label == "pass")
    assert (result.usage, result.model_calls) == (Usage(7, 2), 1)


def test_default_criteria_fail_unsupported_claims(Evaluator) -> None:
    assert "An unsupported claim is a failure" in DEFAULT_CRITERIA
    model = ScriptedModel([verdict("fail", "no evidence for 42")])
    Evaluator(model).evaluate("t", "d")
    text = model.requests[0].messages[0].text
    assert DEFAULT_CRITERIA in text
    assert "(no evidence was given)" in text


def test_custom_criteria_replace_the_default(Evaluator) -> None:
    model = ScriptedModel([verdict("pass")])
    Evaluator(model, criteria="Only check spelling.").evaluate("t", "d")
    text = model.requests[0].messages[0].text
    assert "Only check spelling." in text
    assert DEFAULT_CRITERIA not in text


@pytest.mark.parametrize(
    ("evidence", "rendered"),
    [
        ("one fact", "one fact"),
        (["a", "b"], "[1] a\n[2] b"),
        ({"quote": "42", "news": "merger"}, "[quote] 42\n[news] merger"),
        ([], "(no evidence was given)"),
        ("   ", "(no evidence was given)"),
    ],
)
def test_evidence_forms(evidence: Any, rendered: str, Evaluator) -> None:
    assert f"<evidence>\n{rendered}\n</evidence>" in Evaluator(ScriptedModel([])).prompt(
        "t", "d", evidence
    )


def test_an_invalid_verdict_is_retried_then_raised(Evaluator) -> None:
    model = ScriptedModel([verdict("maybe"), verdict("maybe"), verdict("maybe")])
    with pytest.raises(ModelOutputError) as caught:
        Evaluator(model).evaluate("t", "d")
    assert caught.value.model_calls == 3
    assert "verdict" in caught.value.errors


def test_a_retry_that_validates_is_accepted(Evaluator) -> None:
    model = ScriptedModel([verdict("maybe"), verdict("needs_human", "conflicting sources")])
    result = Evaluator(model).evaluate("t", "d")
    assert result == Verdict("needs_human", ["conflicting sources"])
    assert result.model_calls == 2


def test_verdict_is_constructible_and_compares_on_its_vote() -> None:
    assert Verdict("fail", ["x"]) == Verdict(verdict="fail", reasons=["x"])
    assert Verdict("fail", ["x"]) != Verdict("fail", ["y"])
    assert Verdict("pass").reasons == []
    assert Verdict("pass", ["ok"], model_calls=3) == Verdict("pass", ["ok"])
    assert Verdict("pass", ["ok"]).model_dump() == {"verdict": "pass", "reasons": ["ok"]}
    assert Verdict("pass") != "pass"
    with pytest.raises(ValueError):
        Verdict("great")


def test_negative_retries_are_refused_at_construction(Evaluator) -> None:
    with pytest.raises(ConfigurationError, match="max_retries must be >= 0, got -1"):
        Evaluator(ScriptedModel([]), max_retries=-1)
