"""Typed run events, and sinks that record them (re-exported by `agentloops.events`).

Every loop takes `on_event`, a plain callable that receives each event as it happens, on
the thread that runs the loop (the driver brings tool events back from worker threads).
A sink shared by runs on several threads must be thread-safe (`list.append` is;
`JSONLSink` takes a lock). Events are built only when someone listens.

Rule: events know the vocabulary below them (usage, errors, messages) and no loop, model,
tool or store: a plan travels as the pydantic model it is, whichever loop made it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agentloops.errors import RecordWriteError
from agentloops.messages import (
    Block,
    Message,
    SubRun,
    ToolCall,
    ToolOutcome,
    block_to_dict,
    message_to_dict,
    subrun_to_dict,
)
from agentloops.usage import Usage

if TYPE_CHECKING:
    from pathlib import Path

    import pydantic

LOOPS = ("react", "rewoo", "plan_execute", "router", "evaluator", "structured", "text")
"""Every name an event's `loop` may carry (besides "" on a delta straight from a client):
the three loops, the router and the evaluator, and `ask_structured` / `ask_text` called on
their own (a loop that calls them passes its own name)."""


class Record:
    """A record that turns into JSON (an event, a run's result): `to_dict()` is plain
    values only (usage and outcomes as dicts, blocks and messages in their JSON form, a
    plan as its JSON, a `Decimal` cost as exact text), `to_json()` is that as text, fit for
    an HTTP response or a server-sent event. An event's dict names its class under
    `"event"`, a result's under `"result"`."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        kind = "event" if isinstance(self, Event) else "result"
        data: dict[str, Any] = {kind: type(self).__name__}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            data[f.name] = _plain(getattr(self, f.name))
        return data

    def to_json(self, **dumps: Any) -> str:
        """`to_dict()` as JSON text; `dumps` go to `json.dumps` (`indent=2`...)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, **dumps)


@dataclass(frozen=True, kw_only=True, slots=True)
class Event(Record):
    """Fields every event carries."""

    loop: str = ""
    """Which loop emitted it: one of `LOOPS` ("react", "rewoo", "plan_execute", "router",
    "evaluator", "structured", "text"), or "" on a delta straight from a model client,
    before a driver stamps it."""
    run_id: str = ""
    """Identifies one run; nested runs (a Plan-and-Execute step, an agent tool's sub-run)
    have their own."""
    parent_run_id: str | None = None
    """The run this event's run is part of: the Plan-and-Execute run of a step, the run
    whose agent tool (or handoff) made a sub-run; `None` for a top-level run."""
    at: float = field(default_factory=time.perf_counter)
    """`time.perf_counter()` when the event was made: for the time between two events of
    one process (monotonic, not a date); `ts` is the date."""
    ts: float = field(default_factory=time.time)
    """Wall-clock time when the event was made (`time.time()`, seconds since the epoch):
    for logs and clients; not for intervals (the clock may be set back)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(Event):
    parent_call_id: str = ""
    """For a sub-run: the tool call of the parent run it answers ("" otherwise)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFinished(Event):
    stop_reason: str
    usage: Usage
    model_calls: int
    seconds: float


@dataclass(frozen=True, slots=True)
class ModelAttempt:
    """A model that was tried and failed before another answered (a `FallbackModel`'s)."""

    model: str
    """The model's name."""
    kind: str
    """The failure's `ModelError.kind`, e.g. "overloaded"."""
    error: str
    """`"TypeName: message"` of the failure."""
    seconds: float
    """How long the failed try took."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCallStarted(Event):
    step: int
    messages: int
    """How many messages the request carries."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCallFinished(Event):
    step: int
    stop_reason: str
    usage: Usage
    model: str
    """The model that answered."""
    seconds: float
    attempts: tuple[ModelAttempt, ...] = ()
    """The models a `FallbackModel` tried, and that failed, before `model` answered."""
    role: str = ""
    """What the call was for in its loop (`ModelRequest.role`): "react" (a ReAct step),
    "executor" (a Plan-and-Execute step's), "planner", "solver", "reporter"..."""
    cost: Decimal | None = None
    """What the call cost, when the loop knows its model's price."""
    usage_reported: bool = True
    """False: the provider's reply left out its token counts (`ModelResponse.usage_reported`),
    so `usage` (and `cost`) count too little."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStarted(Event):
    call_id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallFinished(Event):
    call_id: str
    name: str
    outcome: ToolOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanMade(Event):
    plan: pydantic.BaseModel
    """The validated plan: a `ReWOOPlan` (loop "rewoo") or a `Plan` ("plan_execute")."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepStarted(Event):
    step_id: str
    description: str


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFinished(Event):
    step_id: str
    ok: bool
    seconds: float
    summary: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Replanned(Event):
    attempt: int
    problems: list[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardTripped(Event):
    """A guard (or any middleware raising `GuardrailTripped`) said no: an input or output
    guard's trip stops the run with "guardrail"; a tool guard's turns the call into an
    error result the model reads."""

    guard: str
    """The guard's name (`Middleware.name`)."""
    stage: str
    """Where it tripped: "input", "output", "tool_call" or "tool_result"."""
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequested(Event):
    calls: list[ToolCall]
    """The calls waiting for a decision."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta(Event):
    """A piece of the reply's text as the model writes it (streaming only)."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta(Event):
    """A piece of the model's visible reasoning as it is written (streaming only)."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallDelta(Event):
    """A piece of a tool call as the model writes it (streaming only).

    The first delta of a call carries its `call_id` and `name`; `arguments` is the next
    fragment of the arguments' JSON (join the fragments of one `index` to read them).
    A call is run only from the complete reply, never from its fragments.
    """

    index: int
    """The call's position among this reply's tool calls."""
    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputDelta(Event):
    """A typed run's final answer (`output_type=`) as the model writes it (streaming), and
    once more when it is accepted.

    While the answer is written, `data` is its JSON parsed so far (dicts, lists, strings
    cut where the model has got to; not yet validated), whichever way the client obtains
    it (native output, a prompt, a final-answer tool). The last `OutputDelta` of a run
    comes after validation and the `output_validator`: `final` is True, and `output` is
    the accepted value, equal to `result.output` (`data` is its JSON). An answer that is
    rejected is followed by the deltas of the next attempt.
    """

    data: Any
    output: Any = None
    """The accepted output (only on the last delta, where `final` is True)."""
    final: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextCompacted(Event):
    """`Compaction` made the model's view of the run smaller before a model call (the run's
    own transcript keeps every turn). Counts are in tokens, as estimated and calibrated
    on what the server reported."""

    step: int
    """The model call it was done for."""
    role: str
    """That call's role ("react", "executor", "solver", "reporter"...)."""
    reason: str
    """"budget": the request would have passed the window; "count": the client's own
    count said so (`Compaction(count=True)`); "context_window": the server refused it as
    too long all the same, and it was compacted harder and sent again."""
    tokens_before: int
    tokens_after: int
    max_context_tokens: int
    elided: int = 0
    """Old tool outputs replaced by a note."""
    summarized: int = 0
    """Older messages replaced by a summary (or by a note, without `summarize`)."""
    cut: int = 0
    """Long texts cut down to fit, longest first."""


Delta = TextDelta | ThinkingDelta | ToolCallDelta
"""What a streaming model client yields before its final `ModelResponse`."""

EventSink = Callable[[Event], None]


def _plain(value: Any) -> Any:
    if isinstance(value, Usage | ModelAttempt):
        return dataclasses.asdict(value)
    if isinstance(value, ToolOutcome):
        data = {"content": value.content, "is_error": value.is_error, "seconds": value.seconds}
        if value.retry:  # only then: the records stay as they were for every other outcome
            data["retry"] = True
        if value.run is not None:
            data["run"] = subrun_to_dict(value.run)
        return data
    if isinstance(value, SubRun):
        return subrun_to_dict(value)
    if isinstance(value, Block):
        return block_to_dict(value)
    if isinstance(value, Message):
        return message_to_dict(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Decimal):
        return str(value)  # exact, as JSON text
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict for an event, with its class name under `"event"` (`to_dict()`)."""
    return event.to_dict()


class JSONLSink:
    """Appends one JSON line per event to a file. Thread-safe; use as a context manager.

    Each line is written whole or not at all: a value JSON cannot hold is stored as its
    text, a torn last line left by a crash is cut off when the file is opened (with a
    warning), and a write that fails (a full disk) raises `RecordWriteError`, with the
    file cut back to its last whole line; the loop that was running attaches its
    partial result to the error.
    """

    def __init__(self, path: str | Path):
        from pathlib import Path  # here, with the first sink: a cheaper `import agentloops`

        from agentloops._jsonl import JSONLFile

        self.path = Path(path)
        self._file = JSONLFile(self.path)

    def __call__(self, event: Event) -> None:
        from agentloops._jsonl import WriteFailed

        try:
            self._file.append(event_to_dict(event))
        except WriteFailed as exc:
            raise RecordWriteError(str(exc), path=self.path, errno=exc.errno) from exc.__cause__

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JSONLSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
