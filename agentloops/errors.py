"""The exceptions agentloops raises.

    AgentLoopsError                 root; `.result` holds the partial run when there is one
    ├── ConfigurationError          the caller's mistake, raised before anything runs
    │   └── DecisionRefused         a decision of the wrong kind, for no call, or contradicted
    ├── ModelError                  the provider failed after its retries (`.kind`, `.status`)
    │   └── ContextWindowExceeded   the prompt does not fit the model's context window
    ├── ModelOutputError            structured output still invalid after retries (`.raw`)
    ├── TranscriptError             a transcript the provider would reject
    ├── PlanValidationError         a plan that must not run (`.problems`)
    ├── GuardrailTripped            a guard said no (`.reason`, `.guard`, `.stage`)
    ├── CheckpointError             a run the loop cannot resume (`.run_id`, `.seq`, `.field`)
    ├── RecordWriteError            a JSONL record could not be written (`.path`; an OSError)
    ├── CassetteError               a cassette file that cannot be replayed (`.exchange`, `.field`)
    ├── StoreError                  the run store failed or refused a write (`.run_id`)
    │   ├── RunNotFound             no run with that id
    │   ├── RunExists               `start` of a run id that is taken
    │   ├── RunLeased               another holder drives the run (`.holder`, `.until`)
    │   ├── LeaseLost               the lease expired or was taken over; nothing was written
    │   └── JournalConflict         the journal moved past `after=`, or a keyed record exists
    └── RunError                    a run stopped short of an answer (`.result`)
        ├── StepLimitExceeded       `max_steps` (or `max_tool_calls`) reached
        ├── BudgetExceeded          the token or cost budget is spent
        ├── DeadlineExceeded        the run's wall-clock deadline passed
        ├── RunStalled              the same calls gave the same results again and again
        ├── ModelRefused            the model declined to answer
        ├── OutputTruncated         the answer was cut by `max_tokens` or the context window
        ├── EmptyReply              the model answered with nothing, even when asked again
        ├── ApprovalRequired        a tool call waits for a human decision
        ├── CallInDoubt             a durable run's call started, its outcome never recorded
        ├── HandoffCycle            a handoff back to a loop already in the chain of handoffs
        ├── ToolStepFailed          a tool step failed with `on_tool_error="abort"`
        └── InvalidOutput           the answer never matched `output_type` (or its validator)

    ModelRetry                      not an error: a tool or an output validator asks the
                                    model to try again (its message goes to the model)

Tool failures are not exceptions: they come back as `is_error` results the model can
act on. A run error never loses work: its `.result` carries the transcript, usage and
whatever finished.

Rule: only `usage` below it; the records the errors carry are typed loosely (`Any`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from agentloops.usage import Usage


class AgentLoopsError(Exception):
    """Root of every agentloops exception."""

    result: Any = None
    """The partial result of the run that raised, when a run was under way."""


class ConfigurationError(AgentLoopsError, ValueError):
    """The caller's mistake: a bad limit, a duplicate tool, an unknown call id."""


class DecisionRefused(ConfigurationError):
    """A decision on a durable run's call that cannot be recorded: no such call waits, a
    contradicting decision is on record, or it is the wrong kind of decision (an approval
    for a call in doubt, or "rerun" for a call waiting for approval). Nothing was written."""

    def __init__(self, message: str, *, run_id: str = "", call_id: str = ""):
        super().__init__(message)
        self.run_id = run_id
        self.call_id = call_id


def check_limits(**limits: tuple[int | None, int]) -> None:
    """Raise `ConfigurationError` for the first `name=(value, least)` with `value < least`.

    A `None` value means "no limit" and passes.
    """
    for name, (value, least) in limits.items():
        if value is not None and value < least:
            raise ConfigurationError(f"{name} must be >= {least}, got {value}")


ErrorKind = Literal[
    "rate_limited",
    "overloaded",
    "unavailable",
    "timeout",
    "context_window",
    "bad_request",
    "auth",
    "not_found",
    "bad_reply",
    "other",
]
"""What went wrong with a model call, in words a fallback or a limiter can decide on."""


def kind_of_status(status: int | None) -> ErrorKind:
    """The kind of failure an HTTP status means (`None`: no answer, so "unavailable")."""
    if status is None:
        return "unavailable"
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status in (408, 504):
        return "timeout"
    if status >= 500 or status == 409:
        return "unavailable"
    if status in (401, 402, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status >= 400:
        return "bad_request"
    return "other"


class ModelError(AgentLoopsError):
    """The model provider failed after its own retries. The cause is chained.

    Attributes:
        kind: what went wrong (`ErrorKind`): "rate_limited", "overloaded", "unavailable"
            (5xx, no connection), "timeout", "context_window", "bad_request", "auth"
            (401, 402, 403), "not_found", "bad_reply" (an answer that cannot be read) or
            "other". Derived from `status` when not given.
        status: the HTTP status, when there was an answer.
        request_id: the provider's id for the request, when it sent one.
        retry_after: seconds the provider asked to wait (`Retry-After`), when it did.
        failures: for a `FallbackModel` whose every model failed, each model's name and
            error, in the order tried.
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str | None = None,
        status: int | None = None,
        kind: ErrorKind | None = None,
        retry_after: float | None = None,
        failures: Sequence[tuple[str, ModelError]] = (),
    ):
        super().__init__(message)
        self.request_id = request_id
        self.status = status
        self.kind: ErrorKind = kind or (kind_of_status(status) if status else "other")
        self.retry_after = retry_after
        self.failures = list(failures)


class ContextWindowExceeded(ModelError):
    """The prompt (with the output it asks for) does not fit the model's context window.

    Never retried as transient: the same request fails the same way. A `FallbackModel`
    falls back on it by default (a model with a larger window may take the request).

    Attributes:
        tokens: what the request came to, as the server counted it (with the output it
            asked for, where the server adds that), when its error said.
        limit: the model's context window in tokens, when the server's error said.
    """

    def __init__(
        self,
        message: str,
        *,
        request_id: str | None = None,
        status: int | None = None,
        tokens: int | None = None,
        limit: int | None = None,
    ):
        super().__init__(message, request_id=request_id, status=status, kind="context_window")
        self.tokens = tokens
        self.limit = limit


class ModelOutputError(AgentLoopsError):
    """Structured output that still does not parse or validate after the retries."""

    def __init__(self, message: str, *, raw: str, usage: Usage, model_calls: int, errors: str = ""):
        super().__init__(message)
        self.raw = raw
        """The model's last raw output."""
        self.errors = errors
        """The last validation errors, as sent back to the model."""
        self.usage = usage
        """Tokens spent on the failed attempts."""
        self.model_calls = model_calls


class TranscriptError(AgentLoopsError):
    """A transcript the provider would reject (unanswered tool calls, split results, ...)."""


class PlanValidationError(AgentLoopsError):
    """A plan that must not run. `.problems` names every problem found, not just the first."""

    def __init__(self, problems: list[str], *, plan: Any = None):
        self.problems = list(problems)
        self.plan = plan
        listed = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid plan ({len(self.problems)} problems):\n{listed}")


class GuardrailTripped(AgentLoopsError):
    """A guard said no: raised by a guard's check (or returned as a reason), or by any
    middleware hook. An input or output guard's trip stops the run with stop reason
    "guardrail" (the run returns its partial result, it does not raise); a tool guard's
    turns that call into an error result the model reads."""

    def __init__(self, reason: str, *, guard: str = "", stage: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.guard = guard
        self.stage = stage


class CheckpointError(AgentLoopsError):
    """A stored run this loop cannot resume: another loop's, journaled by a newer
    agentloops, or a journal that does not match the loop (its settings, prompts or tools
    changed, or a record was altered)."""

    def __init__(
        self, message: str, *, run_id: str, seq: int | None = None, field: str | None = None
    ):
        super().__init__(message)
        self.run_id = run_id
        self.seq = seq
        """The journal record at fault (its sequence number), when one is."""
        self.field = field
        """The field at fault in that record (`"response.stop_reason"`), when one is."""


class CassetteError(AgentLoopsError, ValueError):
    """A cassette file that cannot be replayed: not JSON, another version, or an exchange
    with a missing, unknown or ill-typed field (a hand edit gone wrong). `.exchange` is the
    exchange's number (from 1; `None` for the file as a whole), `.field` its field."""

    def __init__(self, message: str, *, exchange: int | None = None, field: str = ""):
        super().__init__(message)
        self.exchange = exchange
        self.field = field


class RecordWriteError(AgentLoopsError, OSError):
    """A JSONL record (a run event, a batch result) could not be written: a full disk,
    an I/O error. The file is left holding whole lines only; `.errno` is the cause's,
    and `.result` the partial result (for `run_many`, every item finished so far)."""

    def __init__(self, message: str, *, path: Any, result: Any = None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.result = result
        self.errno = errno


class StoreError(AgentLoopsError):
    """The run store failed (its database is unreachable, a record is corrupted, the
    schema is newer than this agentloops) or refused a write. The cause is chained."""

    def __init__(self, message: str, *, run_id: str = ""):
        super().__init__(message)
        self.run_id = run_id


class RunNotFound(StoreError):
    """No run with that id is stored."""


class RunExists(StoreError):
    """A run with that id is stored already, so `start` cannot create it."""


class RunLeased(StoreError):
    """Another holder drives the run: its lease is current.

    Attributes:
        holder: the id of the holder (by default `host:pid:random`).
        until: when its lease expires unless renewed (a UTC `datetime`, by the store's clock).
    """

    def __init__(self, message: str, *, run_id: str, holder: str, until: Any):
        super().__init__(message, run_id=run_id)
        self.holder = holder
        self.until = until


class LeaseLost(StoreError):
    """The lease a write named is no longer current: it expired, or another holder took the
    run over (a higher epoch), or the run was deleted. Nothing was written."""

    def __init__(self, message: str, *, run_id: str, holder: str, epoch: int):
        super().__init__(message, run_id=run_id)
        self.holder = holder
        self.epoch = epoch


class JournalConflict(StoreError):
    """An append the journal refused, writing nothing: the journal's last sequence number is
    not the `after=` the caller expected, or a record with the same kind and key exists.

    Attributes:
        last_seq: the journal's last sequence number when the append was refused.
        record: the record that holds the key, for a key conflict; else `None`.
    """

    def __init__(self, message: str, *, run_id: str, last_seq: int, record: Any = None):
        super().__init__(message, run_id=run_id)
        self.last_seq = last_seq
        self.record = record


class RunError(AgentLoopsError):
    """A run that stopped short of an answer. `.result` holds everything done so far."""

    def __init__(self, message: str, *, result: Any = None):
        super().__init__(message)
        self.result = result


class StepLimitExceeded(RunError):
    """The loop reached `max_steps` without an answer."""


class BudgetExceeded(RunError):
    """The run spent its token budget (`max_total_tokens`) or its money (`max_cost`)."""


class DeadlineExceeded(RunError):
    """The run's `deadline` passed before it answered."""


class RunStalled(RunError):
    """The model repeated the same tool calls and got the same results, again and again."""


class ModelRefused(RunError):
    """The model declined to answer (`stop_reason="refusal"`)."""


class OutputTruncated(RunError):
    """The answer was cut off by `max_tokens` or by the context window."""


class EmptyReply(RunError):
    """The model's reply was empty, and still empty when it was asked once more."""


class ApprovalRequired(RunError):
    """A tool call is waiting for a human decision; see `result.pending_approvals`."""


class CallInDoubt(RunError):
    """A durable run stopped at a tool call that started before an interruption and whose
    outcome was never recorded, because its tool may not simply run again (`on_doubt`).
    `.calls` holds the calls; `resume(run_id, {call_id: "rerun" or "skip"})` decides."""

    def __init__(self, message: str, *, calls: list[Any], policy: str = "ask", result: Any = None):
        super().__init__(message, result=result)
        self.calls = calls
        self.policy = policy
        """The tool's `on_doubt`: "ask" (the run waits for a person, status "in_doubt")
        or "fail" (the run failed, status "failed"; a decision still resumes it)."""


class HandoffCycle(RunError):
    """A handoff would hand the conversation back to a loop already in the chain of
    handoffs that led to it (`stop_reason="handoff_cycle"`)."""


class ToolStepFailed(RunError):
    """A tool step failed and the run was configured to abort on tool errors."""


class InvalidOutput(RunError):
    """The final answer never matched the loop's `output_type`, or its `output_validator`
    kept asking for another, within `max_output_retries` (`stop_reason="invalid_output"`;
    the last problem is in the result's `detail`)."""


class ModelRetry(Exception):
    """Raise it from a tool or an output validator to send `message` to the model, which
    then tries again.

    From a tool, the call's result is an error result carrying the message; a tool may ask
    `retries` times in a row (`@tool(retries=N)`, default 1), after which the result says
    its retries are spent and the run goes on. From an `output_validator`, the message goes
    back with the answer it rejected, within the loop's `max_output_retries`.

    Examples:
        >>> from agentloops import ModelRetry, tool
        >>> @tool
        ... def city_weather(city: str) -> str:
        ...     '''The weather in a city (English names).'''
        ...     if city == "Köln":
        ...         raise ModelRetry("use the English name, Cologne")
        ...     return "12C"
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


STOP_ERRORS: dict[str, type[RunError]] = {
    "max_steps": StepLimitExceeded,
    "max_tool_calls": StepLimitExceeded,
    "empty": EmptyReply,
    "budget": BudgetExceeded,
    "deadline": DeadlineExceeded,
    "stalled": RunStalled,
    "approval_required": ApprovalRequired,
    "refused": ModelRefused,
    "max_tokens": OutputTruncated,
    "context_window": OutputTruncated,
    "tool_failed": ToolStepFailed,
    "invalid_output": InvalidOutput,
    "handoff_cycle": HandoffCycle,
}
"""The error each loop's `raise_for_stop` raises per `stop_reason` (others: `RunError`)."""


def raise_for_stop(result: Any) -> None:
    """Raise the `RunError` matching `result.stop_reason`, carrying `result`, unless it answered."""
    if result.stop_reason != "answered":
        error = STOP_ERRORS.get(result.stop_reason, RunError)
        raise error(result.detail or result.stop_reason, result=result)
