"""The effects a loop's step machine asks for, and the outcome each one expects back.

A step machine is a generator: it yields an effect, a driver performs it and sends the
outcome back (or throws the exception it raised). The machine never does I/O or draws a
random number, and no decision reads a clock: run ids and the clock that times a run come
in as inputs (the events it emits are stamped when made, so a replay's `at` differ).
Given the same outcomes it makes the same decisions, so a run can be replayed from a
journal of them.

| effect      | the driver                                        | outcome sent back            |
|-------------|---------------------------------------------------|------------------------------|
| `CallModel` | calls `client` (streaming it when someone listens) | the `ModelResponse`          |
| `CheckOutput` | calls the output validator (awaits an async one)  | the value it returns         |
| `CheckGuard` | calls a guard's check (with a `call`: alongside it) | why it trips, or `None` [1] |
| `StartTool` | starts the call (queued: a lone call runs inline)  | `None`                       |
| `NextTool`  | waits for a started call to finish                 | `(call_id, ToolOutcome)`     |
| `Decide`    | looks for human decisions on the calls            | `{call_id: bool}`, or `None` |
| `Journal`   | appends records to a durable run's journal        | `None`                       |
| `Emit`      | hands the event to the sink                       | `None`                       |

[1] With a `call`, the call's `ModelResponse`; a trip is thrown back as `GuardrailTripped`.

A call of an agent tool (or a handoff) is a sub-run: the driver drives its machine itself,
and the call's outcome carries the sub-run (`ToolOutcome.run`).

Rule: records only: no driver, no loop, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from agentloops.messages import ToolCall
from agentloops.model import ModelClient, ModelRequest, ModelResponse

if TYPE_CHECKING:
    from agentloops.events import Event
    from agentloops.tools.cache import ToolCache
    from agentloops.usage import Price

R = TypeVar("R")


def call_key(run_id: str, call_id: str) -> str:
    """A call's default key: its idempotency key, and its key in a run's journal (the
    ReWOO worker gives its calls keys of their own)."""
    return f"{run_id}:{call_id}"


@dataclass(frozen=True, slots=True)
class OutputTarget:
    """Where a call may write a typed run's final answer, so a streaming driver can parse
    it as it arrives (`OutputDelta`): the text, or the arguments of the final-answer tool."""

    tool: str
    """The final-answer tool's name, when the client offers one."""
    key: str | None = None
    """A non-object output is wrapped under this key of the JSON object."""


@dataclass(slots=True)
class CallModel:
    """Call `client` with `request`."""

    client: ModelClient
    request: ModelRequest
    loop: str
    run_id: str
    step: int
    """The machine's count of model calls so far in this run (for the events)."""
    pricer: Callable[[ModelResponse], Price] | None = None
    """Prices the reply, for its `ModelCallFinished.cost` (set by `engine.meter`)."""
    output: OutputTarget | None = None
    """Set when the reply may be the run's final typed answer (see `OutputTarget`)."""
    parent_run_id: str | None = None
    """The run this one is part of, for the events (set by `engine.runs.nested`)."""

    @property
    def role(self) -> str:
        """What the call is for in its loop: its request's `role` (the one record)."""
        return self.request.role


@dataclass(slots=True)
class CheckOutput:
    """Call a loop's `output_validator` with a validated answer and its context; the outcome
    is the value it returns (`None` keeps `value`). A `ModelRetry` it raises, and any other
    exception, is thrown back into the machine, which decides."""

    validator: Callable[[Any, Any], Any]
    value: Any
    context: Any
    """The validator's second argument (an `agentloops.output.OutputContext`)."""
    loop: str
    run_id: str
    step: int
    """The model call whose answer is checked (matches the journal on replay)."""


@dataclass(slots=True)
class CheckGuard:
    """Call a guard's `check(value, context)` (sync or async): the outcome is the reason it
    trips (a `GuardrailTripped` it raises counts as its reason), or `None` when it passes.

    With `call`, the check runs alongside that model call: under asyncio at the same time,
    the call cancelled when the check trips; under the sync driver first. The outcome is
    then the call's response, and a trip is thrown back as `GuardrailTripped`."""

    check: Callable[[Any, Any], Any]
    value: Any
    context: Any
    """The check's second argument (an `agentloops.MiddlewareContext`)."""
    guard: str
    """The guard's name (the journal's record, the event)."""
    stage: str
    loop: str
    run_id: str
    step: int
    """The model call the check belongs to (matches the journal on replay)."""
    call: CallModel | None = None


@dataclass(slots=True)
class SubStart:
    """How the sub-run of a hosted call (an agent tool, a handoff) starts when not from the
    call's arguments alone."""

    task: Any = None
    """A handoff's task: the transcript the target continues."""
    state: dict[str, Any] | None = None
    """A paused sub-run to resume, as its `SubRun.state` (no store: a run resumed from
    its result)."""
    decisions: dict[str, bool] | None = None
    """The decisions it resumes with."""


@dataclass(slots=True)
class StartTool:
    """Start one tool call; its outcome comes back through a later `NextTool`.

    The machine bounds how many calls it has started and not yet collected.
    """

    call: ToolCall
    loop: str
    run_id: str
    key: str = ""
    """The call's idempotency key, the same on every replay of the run (default
    `run_id:call_id`); a tool reads it with `agentloops.idempotency_key()`."""
    parent_run_id: str | None = None
    """The run this one is part of, for the events (set by `engine.runs.nested`)."""
    start: SubStart | None = None
    """For a hosted call (an agent tool, a handoff): how its sub-run starts, when not from
    the arguments (a handoff's transcript, a paused sub-run resumed)."""
    cache: ToolCache | None = None
    """Where the call's result may come from, and is kept, besides its tool's own cache
    (set by a middleware: `agentloops.CachedTools`); consulted where the tool runs."""

    @property
    def call_key(self) -> str:
        return self.key or call_key(self.run_id, self.call.id)


@dataclass(slots=True)
class NextTool:
    """Wait until one started call finishes; the outcome is `(call_id, ToolOutcome)`.
    Calls finish in any order: the machine puts results back in the order it needs."""

    loop: str
    run_id: str


@dataclass(slots=True)
class Decide:
    """Ask for human decisions on calls that need approval: `{call_id: approved}` for
    every call, or `None` when no decision is at hand (the machine then pauses the run)."""

    calls: list[ToolCall]
    loop: str
    run_id: str


@dataclass(slots=True)
class Journal:
    """Append `entries` (`(kind, data)` or `(kind, data, key)`) to a durable run's journal
    through `write`, and set its status when `status` is given. Only the durable wrapper
    yields these (`agentloops.engine.durable`)."""

    write: Callable[[list[Any], str | None], None]
    entries: list[Any]
    status: str | None = None


@dataclass(slots=True)
class Emit:
    """Hand `event` to whoever listens. Machines emit only when told someone does."""

    event: Event


Effect = CallModel | CheckOutput | CheckGuard | StartTool | NextTool | Decide | Journal | Emit

Machine = Generator[Effect, Any, R]
"""A step machine that returns `R` (a run's result) when it is done."""
