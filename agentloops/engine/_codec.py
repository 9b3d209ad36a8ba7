"""Outcomes as JSON records for a run's journal, and back: exactly what a machine was sent.

The way back takes records checked against their kind's schema (`engine._records`).
Rule: pure functions over the vocabulary's records; no store, no driver.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
    usage = response.usage  # its four counts, without `dataclasses.asdict`'s deep copy
    data = {
        "message": message_to_dict(response.message),
        "stop_reason": response.stop_reason,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
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
