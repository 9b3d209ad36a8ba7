"""A loop's typed final answer from one structured call: how a ReWOO solver and a
Plan-and-Execute reporter fill `output_type` (a ReAct run's answer is judged turn by turn,
in `react._typed`).

Rule: above structured output, below the loops; it knows neither loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from agentloops.engine.effects import Machine
from agentloops.engine.runs import Totals
from agentloops.errors import ModelOutputError
from agentloops.model import ModelClient
from agentloops.output import OutputSpec
from agentloops.structured import Answering, Stopped, ask_machine

V = TypeVar("V")


@dataclass(frozen=True, kw_only=True, slots=True)
class TypedAnswer(Generic[V]):
    """How a loop's typed final answer came out (`answer_machine`)."""

    stop_reason: Literal["answered", "refused", "context_window", "invalid_output"]
    output: V | None
    """The accepted output (`None` unless answered)."""
    text: str
    """The output as JSON text ("" unless answered): the loop's `answer`. What the calls
    cost is in the run's `totals`, which every call added to."""
    detail: str = ""


def answer_machine(
    model: ModelClient,
    spec: OutputSpec[V],
    prompt: str,
    *,
    system: str,
    max_retries: int,
    max_tokens: int | None,
    loop: str,
    run_id: str,
    answering: Answering,
    role: str = "",
    totals: Totals | None = None,
) -> Machine[TypedAnswer[V]]:
    """A ReWOO solver's or a Plan-and-Execute reporter's typed answer: `ask_structured` for
    any output type, with the loop's `output_validator` (a `ModelRetry` it raises goes back
    like a validation error, within the same `max_retries`), the answer streamed as it is
    written, and the accepted value announced (`OutputDelta`). Still rejected after the
    retries, it comes back "invalid_output" with the last problem in `detail`. Each call
    adds to `totals` (the run's; default: its own), as every model call does."""
    if totals is None:
        totals = Totals()
    try:
        reply = yield from ask_machine(
            model,
            spec,
            prompt,
            system,
            max_retries,
            max_tokens,
            loop,
            run_id,
            role,
            totals,
            answering,
        )
    except ModelOutputError as exc:
        detail = (
            f"max_output_retries={max_retries}: {exc.model_calls} answers were rejected; "
            f"the last: {exc.errors}"
        )
        return TypedAnswer(
            stop_reason="invalid_output",
            output=None,
            text="",
            detail=detail,
        )
    except Stopped as stopped:
        return TypedAnswer(
            stop_reason=stopped.reason,
            output=None,
            text="",
            detail=stopped.detail,
        )
    return TypedAnswer(
        stop_reason="answered",
        output=reply.value,
        text=spec.text(reply.value),
    )
