"""Schema-guided output: ask the model for a pydantic model, validate, retry with the errors.

Every loop fills its plans, routes and verdicts through `ask_structured`, so a
malformed answer is handled the same way everywhere: the validation errors go back
to the model, a bounded number of times, then `ModelOutputError` with the last raw output.

Rule: above the engine, below the loops: loops call it, it knows none of them, and providers
never import it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import pydantic

from agentloops.engine import sync
from agentloops.engine.effects import Machine
from agentloops.engine.host import NO_TOOLS as _NO_TOOLS
from agentloops.engine.runs import Totals, call_model, empty, nudge
from agentloops.errors import ConfigurationError, ModelOutputError, ModelRetry
from agentloops.events import EventSink
from agentloops.messages import Message, Text, ToolResult
from agentloops.model import (
    AnswerStop,
    ModelClient,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    answer_stop,
)
from agentloops.output import MAX_ERRORS_CHARS as MAX_ERRORS_CHARS
from agentloops.output import (
    OutputContext,
    OutputSpec,
    OutputValidator,
    accepted,
    checked,
    problem,
    sendable,
)
from agentloops.usage import Usage

T = TypeVar("T", bound=pydantic.BaseModel)
V = TypeVar("V")

_CUT_OFF = (
    "your reply was cut off by the output limit before the JSON was complete; "
    "reply again with a shorter JSON object"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class StructuredReply(Generic[V]):
    """A validated value, and what it cost to get it."""

    value: V
    usage: Usage
    model_calls: int
    raw: str
    """The model's raw output for the accepted answer."""


def output_schema(schema: type[pydantic.BaseModel]) -> OutputSchema:
    """The `OutputSchema` for a pydantic model."""
    return _spec_of(schema).schema


def ask_structured(
    model: ModelClient,
    schema: type[T],
    prompt: str | list[Message],
    *,
    system: str = "",
    max_retries: int = 2,
    max_tokens: int | None = None,
    on_event: EventSink | None = None,
    loop: str = "structured",
    run_id: str = "",
) -> StructuredReply[T]:
    """Ask `model` for JSON matching `schema`; on failure send the errors back and retry.

    A reply cut off by the output limit is retried with a request for a shorter one.

    Raises:
        ModelOutputError: still invalid after `max_retries` retries; carries `.raw`,
            `.errors`, and `.usage`/`.model_calls` spent so far.
    """
    machine = structured_machine(
        model,
        schema,
        prompt,
        system=system,
        max_retries=max_retries,
        max_tokens=max_tokens,
        loop=loop,
        run_id=run_id,
    )
    return sync.run(machine, _NO_TOOLS, on_event)


async def aask_structured(
    model: ModelClient,
    schema: type[T],
    prompt: str | list[Message],
    *,
    system: str = "",
    max_retries: int = 2,
    max_tokens: int | None = None,
    on_event: EventSink | None = None,
    loop: str = "structured",
    run_id: str = "",
) -> StructuredReply[T]:
    """`ask_structured` on the event loop."""
    machine = structured_machine(
        model,
        schema,
        prompt,
        system=system,
        max_retries=max_retries,
        max_tokens=max_tokens,
        loop=loop,
        run_id=run_id,
    )
    from agentloops.engine import aio  # asyncio loads with the first async run

    return await aio.run(machine, _NO_TOOLS, on_event)


def structured_machine(
    model: ModelClient,
    schema: type[T],
    prompt: str | list[Message],
    *,
    system: str = "",
    max_retries: int = 2,
    max_tokens: int | None = None,
    loop: str = "structured",
    run_id: str = "",
    role: str = "",
    totals: Totals | None = None,
) -> Machine[StructuredReply[T]]:
    """`ask_structured` as a step machine: what every loop's planner, router and
    evaluator runs inside its own machine. `role` names what its calls are for (the
    cost per role).

    Every call adds to `totals` (a run's running totals; default: its own) as it is made,
    so a run that fails here has counted its calls; the reply (or the `ModelOutputError`)
    still says what this answer cost."""
    if max_retries < 0:
        raise ConfigurationError(f"max_retries must be >= 0, got {max_retries}")
    if totals is None:
        totals = Totals()
    spec: OutputSpec[T] = _spec_of(schema)
    return ask_machine(
        model, spec, prompt, system, max_retries, max_tokens, loop, run_id, role, totals
    )


@functools.lru_cache(maxsize=256)
def _spec_of(schema: type[pydantic.BaseModel]) -> OutputSpec[Any]:
    """One spec per schema (planners and routers ask with the same few, again and again)."""
    return OutputSpec(schema)


@dataclass(frozen=True, slots=True)
class Answering:
    """What a loop's typed final answer adds to a structured call (`ask_machine`): the
    validator, the run's totals so far, and whether someone watches (then the answer is
    streamed as it is written and announced when accepted)."""

    validator: OutputValidator | None
    observed: bool
    uncounted: Usage = field(default_factory=Usage)
    """What the run spent that its `totals` do not hold (a Plan-and-Execute run's steps):
    the validator's context counts it."""


class Stopped(Exception):
    """The model refused, or the context window ran out: no retry can help."""

    def __init__(self, response: ModelResponse):
        super().__init__(response.stop_reason)
        self.reason: Literal["refused", "context_window"] = (
            "refused" if response.stop_reason == "refusal" else "context_window"
        )
        self.detail = f"model stop_reason={response.stop_reason}"


def ask_machine(
    model: ModelClient,
    spec: OutputSpec[V],
    prompt: str | list[Message],
    system: str,
    max_retries: int,
    max_tokens: int | None,
    loop: str,
    run_id: str,
    role: str,
    totals: Totals,
    answering: Answering | None = None,
) -> Machine[StructuredReply[V]]:
    """`ask_structured` for any output type as a step machine: ask, validate, send the errors
    back, at most `max_retries` times. With `answering` (a loop's final answer) the answer
    goes through the loop's validator too, and a refusal or a full context window stops it
    (`Stopped`): no retry can help.

    Raises:
        ModelOutputError: still rejected after the retries.
        Stopped: with `answering`, the model refused or the context window ran out.
    """
    messages = [Message.user(prompt)] if isinstance(prompt, str) else list(prompt)
    output = spec.schema
    target = spec.target if answering is not None else None
    mark, raw, errors = totals.mark(), "", ""
    for attempt in range(max_retries + 1):
        request = ModelRequest(system, messages, max_tokens=max_tokens, output=output, role=role)
        # A plan's attempts are numbered from 0; a final answer's go on from the run's count.
        step = attempt if answering is None else None
        response = yield from call_model(model, request, totals, loop, run_id, step, output=target)
        if answering is not None and response.stop_reason in ("refusal", "context_window"):
            raise Stopped(response)
        raw = _raw(response)
        reply = sendable(response.message)
        try:
            value = spec.parse(response)
        except (pydantic.ValidationError, ValueError) as exc:
            errors = problem(exc)
            if response.stop_reason == "max_tokens":
                errors = f"{_CUT_OFF} ({errors})"
            messages = [*messages, reply, _feedback(reply, errors)]
            continue
        if answering is not None:
            if answering.validator is not None:
                context = OutputContext(
                    run_id=run_id,
                    loop=loop,
                    messages=[*messages, reply],
                    usage=answering.uncounted + totals.usage,
                    retries=attempt,
                )
                try:
                    value = yield from checked(
                        spec, answering.validator, value, context, totals.model_calls - 1
                    )
                except ModelRetry as retry:
                    errors = retry.message
                    messages = [*messages, reply, _feedback(reply, errors, rejected=True)]
                    continue
            if answering.observed:
                yield accepted(spec, value, loop, run_id)
        usage, calls = totals.since(mark)
        return StructuredReply(value=value, usage=usage, model_calls=calls, raw=raw)
    usage, calls = totals.since(mark)
    raise ModelOutputError(
        f"{spec.schema.name}: no valid output after {calls} attempts: {errors}",
        raw=raw,
        errors=errors,
        usage=usage,
        model_calls=calls,
    )


def ask_text(
    model: ModelClient,
    prompt: str,
    *,
    system: str = "",
    max_tokens: int | None = None,
    on_event: EventSink | None = None,
    loop: str = "text",
    run_id: str = "",
    step: int = 0,
) -> ModelResponse:
    """One plain-text call from a fresh context (one user turn, no tools), with its events:
    how a ReWOO solver or a Plan-and-Execute reporter writes the answer. An empty reply
    is asked for once more (the response's usage then covers both calls); `reply_stop`
    tells what the final reply means."""
    totals = Totals(model_calls=step)
    machine = text_machine(
        model, prompt, system=system, max_tokens=max_tokens, loop=loop, run_id=run_id, totals=totals
    )
    response = sync.run(machine, _NO_TOOLS, on_event)
    if totals.model_calls - step == 1:
        return response
    return dataclasses.replace(response, usage=totals.usage)


def text_machine(
    model: ModelClient,
    prompt: str,
    *,
    system: str = "",
    max_tokens: int | None = None,
    loop: str = "text",
    run_id: str = "",
    role: str = "",
    totals: Totals | None = None,
) -> Machine[ModelResponse]:
    """`ask_text` as a step machine: the final response. Each call adds to `totals` (a
    run's running totals; default: its own) and is numbered by them; `role` names what
    the calls are for (the cost per role)."""
    if totals is None:
        totals = Totals()
    messages = [Message.user(prompt)]
    request = ModelRequest(system, messages, max_tokens=max_tokens, role=role)
    response = yield from call_model(model, request, totals, loop, run_id)
    if not empty(response):
        return response
    again = list(messages)  # the first request keeps what it sent
    nudge(again, response.message, tools=False)
    retry = ModelRequest(system, again, max_tokens=max_tokens, role=role)
    return (yield from call_model(model, retry, totals, loop, run_id))


def reply_stop(response: ModelResponse) -> AnswerStop | Literal["empty"]:
    """How a run ends on this final reply: `answer_stop` of its stop reason, or
    `"empty"` when it finished normally with no text at all."""
    if empty(response):
        return "empty"
    return answer_stop(response.stop_reason)


def _raw(response: ModelResponse) -> str:
    if response.output is not None:
        return json.dumps(response.output, default=str)
    return response.message.text


def _feedback(reply: Message, errors: str, *, rejected: bool = False) -> Message:
    """The user turn that sends the errors (or a validator's message) back; answers any tool
    call so the turn is valid."""
    why = "was not accepted" if rejected else "did not validate"
    note = (
        f"That output {why}: {errors}. Reply again with only a JSON object that matches the schema."
    )
    results = tuple(ToolResult(c.id, note, True) for c in reply.tool_calls)
    return Message("user", (*results, Text(note)))
