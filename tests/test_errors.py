"""The exception tree: every error is an AgentLoopsError and carries what it promises."""

from __future__ import annotations

import pytest

import agentloops
from agentloops import (
    AgentLoopsError,
    CheckpointError,
    ConfigurationError,
    ModelError,
    ModelOutputError,
    PlanValidationError,
    RunError,
    StepLimitExceeded,
    Usage,
)


def test_every_exported_exception_is_an_agentloops_error() -> None:
    exported = [getattr(agentloops, n) for n in agentloops.__all__]
    errors = [e for e in exported if isinstance(e, type) and issubclass(e, Exception)]
    assert len(errors) >= 15
    assert all(issubclass(e, AgentLoopsError) for e in errors)
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(StepLimitExceeded, RunError)


def test_errors_carry_their_details() -> None:
    assert AgentLoopsError("x").result is None
    model = ModelError("overloaded", request_id="req_1", status=529)
    assert (model.request_id, model.status) == ("req_1", 529)
    output = ModelOutputError("bad", raw="{", errors="x: missing", usage=Usage(), model_calls=3)
    assert (output.raw, output.errors, output.model_calls) == ("{", "x: missing", 3)
    assert CheckpointError("gone", run_id="r1").run_id == "r1"
    assert RunError("stopped", result="partial").result == "partial"


def test_plan_validation_error_lists_every_problem() -> None:
    error = PlanValidationError(["unknown tool 'x'", "cycle: #E1 -> #E2 -> #E1"], plan="p")
    assert error.problems == ["unknown tool 'x'", "cycle: #E1 -> #E2 -> #E1"]
    assert (
        str(error)
        == "invalid plan (2 problems):\n  - unknown tool 'x'\n  - cycle: #E1 -> #E2 -> #E1"
    )
    with pytest.raises(AgentLoopsError):
        raise error
