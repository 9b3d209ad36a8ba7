"""A typed ReAct run's final answer (`output_type=`): judged, sent back when it is wrong,
accepted when it is right, the transcript kept valid either way.

A reply is an answer when it carries the client's parsed `output`, calls the final-answer
tool, or calls no tool at all. It is validated against the output type, then given to the
`output_validator`; a rejection (validation errors, or the validator's `ModelRetry`) goes
back to the model, at most `max_output_retries` times, then the run stops with
"invalid_output". A final-answer call made beside real calls: accepted, the real calls are
not run (each gets a result saying so); rejected, they run as usual and the final call's
result is the rejection, so the model sees both.

Rule: decisions only, no I/O; it knows the ReAct run's state and the output checks, and
no driver or provider.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import pydantic

from agentloops.engine.effects import Machine
from agentloops.engine.runs import Totals
from agentloops.errors import ModelRetry
from agentloops.messages import Message, ToolCall, ToolResult
from agentloops.model import ModelResponse
from agentloops.output import (
    OutputContext,
    OutputSpec,
    OutputValidator,
    accepted,
    checked,
    problem,
    sendable,
)

LOOP = "react"
_ACCEPTED = "final answer accepted"
_NOT_RUN = "not run: the final answer was given in the same turn"
_CUT_OFF = "your reply was cut off by the output limit before the answer was complete"
_UNTYPED = frozenset({"pause_turn", "refusal", "context_window"})
"""Replies the plain ReAct path handles as it does for any run."""

Verdict = tuple[Literal["answered", "invalid_output"], Any]
"""The run ends: `("answered", output)`, or `("invalid_output", detail)`."""


class Settings(Protocol):
    """What the judge reads from the loop."""

    output_validator: OutputValidator | None
    max_output_retries: int


class Run(Protocol):
    """What the judge reads and changes of the run."""

    messages: list[Message]
    run_id: str
    totals: Totals
    rejected: int


def is_answer(spec: OutputSpec[Any], response: ModelResponse) -> bool:
    """Whether `response` is a final-answer attempt (see the module doc)."""
    reason = response.stop_reason
    if reason in _UNTYPED:
        return False
    calls = response.message.tool_calls
    if not calls:
        return True
    if reason == "max_tokens":  # calls cut off: none of them is whole, the answer neither
        return False
    return response.output is not None or any(c.name == spec.tool for c in calls)


def judge(
    loop: Settings,
    spec: OutputSpec[Any],
    run: Run,
    message: Message,
    response: ModelResponse,
    observed: bool,
) -> Machine[Verdict | list[ToolResult] | None]:
    """Judge an answer (`message`: the reply, its call ids made unique).

    Returns how the run ends when the answer is accepted (or the last retry is spent);
    `None` when it was sent back and the model answers next; or the final call's results
    when it was sent back in a turn that also asked for real calls, which the caller runs.
    """
    value, why = yield from _checked(loop, spec, run, message, response)
    calls = message.tool_calls
    if why is None:
        run.messages.append(message)
        if calls:
            run.messages.append(_closing(spec, calls, _ACCEPTED))
        if observed:
            yield accepted(spec, value, LOOP, run.run_id)
        return ("answered", value)
    run.rejected += 1
    note = f"{why}. Answer again, with JSON that matches the output schema."
    run.messages.append(sendable(message))
    final = [c for c in calls if c.name == spec.tool]
    if run.rejected > loop.max_output_retries:
        if calls:
            run.messages.append(_closing(spec, calls, note))
        detail = (
            f"max_output_retries={loop.max_output_retries}: {run.rejected} answers were "
            f"rejected; the last: {why}"
        )
        return ("invalid_output", detail)
    if len(final) < len(calls):  # real calls too: they run, and the model sees both
        return [ToolResult(c.id, note, True) for c in final]
    if calls:
        run.messages.append(Message("user", tuple(ToolResult(c.id, note, True) for c in calls)))
    else:
        run.messages.append(Message.user(note))
    return None


def last(loop: Settings, spec: OutputSpec[Any], run: Run, response: ModelResponse) -> Machine[Any]:
    """The answer of the last call at the step limit (`answer_at_limit`), or `None`: no
    retry is left to send a rejection back to."""
    value, why = yield from _checked(loop, spec, run, response.message, response)
    run.messages.append(response.message if why is None else sendable(response.message))
    calls = response.message.tool_calls
    if calls:
        run.messages.append(_closing(spec, calls, _ACCEPTED if why is None else why))
    return value if why is None else None


def _checked(
    loop: Settings, spec: OutputSpec[Any], run: Run, message: Message, response: ModelResponse
) -> Machine[tuple[Any, str | None]]:
    """The answer validated and through the validator, or why it was rejected."""
    try:
        value = spec.parse(response)
    except (pydantic.ValidationError, ValueError) as exc:
        why = f"Your final answer did not validate: {problem(exc)}"
        if response.stop_reason == "max_tokens":
            why = f"{why} ({_CUT_OFF})"
        return None, why
    validator = loop.output_validator
    if validator is None:
        return value, None
    context = OutputContext(
        run_id=run.run_id,
        loop=LOOP,
        messages=[*run.messages, message],
        usage=run.totals.usage,
        retries=run.rejected,
    )
    try:
        value = yield from checked(spec, validator, value, context, run.totals.model_calls - 1)
    except ModelRetry as retry:
        return None, f"Your final answer was not accepted: {retry.message}"
    return value, None


def _closing(spec: OutputSpec[Any], calls: list[ToolCall], final: str) -> Message:
    """The user turn that answers every call of the answer's turn, so the transcript stays
    valid: the final-answer call gets `final`, the others were not run."""
    results = tuple(
        ToolResult(c.id, final, final != _ACCEPTED)
        if c.name == spec.tool
        else ToolResult(c.id, _NOT_RUN, True)
        for c in calls
    )
    return Message("user", results)
