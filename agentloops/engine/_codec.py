"""Outcomes as JSON records for a run's journal, and back: exactly what a machine was sent.

The way back takes records checked against their kind's schema (`engine._records`).
Rule: pure functions over the vocabulary's records; no store, no driver.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentloops.errors import ContextWindowExceeded, ModelError
from agentloops.messages import (
    ToolOutcome,
    message_from_dict,
    message_to_dict,
    subrun_from_dict,
    subrun_to_dict,
)
from agentloops.model import ModelAttempt, ModelResponse
from agentloops.usage import Usage


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    data = {
        "message": message_to_dict(response.message),
        "stop_reason": response.stop_reason,
        "usage": dataclasses.asdict(response.usage),
        "model": response.model,
        "output": response.output,
    }
    if response.attempts:  # a fallback's failed tries: which model answered, and after what
        data["attempts"] = [dataclasses.asdict(a) for a in response.attempts]
    return data


def response_from_dict(data: dict[str, Any]) -> ModelResponse:
    usage = data["usage"]
    return ModelResponse(
        message_from_dict(data["message"]),
        data["stop_reason"],
        Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            cache_read_tokens=usage["cache_read_tokens"],
            cache_write_tokens=usage["cache_write_tokens"],
        ),
        data["model"],
        data["output"],
        tuple(ModelAttempt(**a) for a in data.get("attempts", ())),
    )


def model_error_to_dict(error: ModelError) -> dict[str, Any]:
    """What a replay needs of a failed model call: the error's kind, status and message."""
    data: dict[str, Any] = {"message": str(error)[:2000], "kind": error.kind}
    if error.status is not None:
        data["status"] = error.status
    return data


def model_error_from_dict(data: dict[str, Any]) -> ModelError:
    """The error again (a `ContextWindowExceeded` for its kind)."""
    status = data.get("status")
    if data["kind"] == "context_window":
        return ContextWindowExceeded(data["message"], status=status)
    return ModelError(data["message"], status=status, kind=data["kind"])


def outcome_to_dict(outcome: ToolOutcome) -> dict[str, Any]:
    data = {"content": outcome.content, "is_error": outcome.is_error, "seconds": outcome.seconds}
    if outcome.retry:  # only then: older journals have no such key
        data["retry"] = True
    if outcome.run is not None:  # an agent tool's sub-run: what it spent, and how it ended
        data["run"] = subrun_to_dict(outcome.run)
    return data


def outcome_from_dict(data: dict[str, Any]) -> ToolOutcome:
    run = data.get("run")
    return ToolOutcome(
        content=data["content"],
        is_error=data["is_error"],
        seconds=data["seconds"],
        retry=data.get("retry", False),
        run=None if run is None else subrun_from_dict(run),
    )


def jsonable(value: Any) -> Any:
    """A value as JSON data (a pydantic model's dump, a dataclass's fields, ...)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)
