"""The exceptions agentloops raises.

    AgentLoopsError                 root; `.result` holds the partial run when there is one
    ├── ConfigurationError          the caller's mistake, raised before anything runs
    ├── ModelError                  the provider failed after its retries (`.request_id`)
    ├── ModelOutputError            structured output still invalid after retries (`.raw`)
    ├── TranscriptError             a transcript the provider would reject
    ├── PlanValidationError         a plan that must not run (`.problems`)
    ├── CheckpointError             a saved run that cannot be loaded (`.run_id`)
    ├── RecordWriteError            a JSONL record could not be written (`.path`; an OSError)
    ├── StoreError                  the run store failed or refused a write (`.run_id`)
    │   ├── RunNotFound             no run with that id
    │   ├── RunExists               `start` of a run id that is taken
    │   ├── RunLeased               another holder drives the run (`.holder`, `.until`)
    │   ├── LeaseLost               the lease expired or was taken over; nothing was written
    │   └── JournalConflict         the journal moved past `after=`, or a keyed record exists
    └── RunError                    a run stopped short of an answer (`.result`)
        ├── StepLimitExceeded       `max_steps` (or `max_tool_calls`) reached
        ├── BudgetExceeded          the token budget is spent
        ├── RunStalled              the same calls gave the same results again and again
        ├── ModelRefused            the model declined to answer
        ├── OutputTruncated         the answer was cut by `max_tokens` or the context window
        ├── EmptyReply              the model answered with nothing, even when asked again
        ├── ApprovalRequired        a tool call waits for a human decision
        ├── CallInDoubt             a durable run's call started, its outcome never recorded
        └── ToolStepFailed          a tool step failed with `on_tool_error="abort"`

Tool failures are not exceptions: they come back as `is_error` results the model can
act on. A run error never loses work: its `.result` carries the transcript, usage and
whatever finished.

Rule: only `usage` below it; the records the errors carry are typed loosely (`Any`).
"""

from __future__ import annotations

from typing import Any

from agentloops.usage import Usage


class AgentLoopsError(Exception):
    """Root of every agentloops exception."""

    result: Any = None
    """The partial result of the run that raised, when a run was under way."""


class ConfigurationError(AgentLoopsError, ValueError):
    """The caller's mistake: a bad limit, a duplicate tool, an unknown call id."""


def check_limits(**limits: tuple[int | None, int]) -> None:
    """Raise `ConfigurationError` for the first `name=(value, least)` with `value < least`.

    A `None` value means "no limit" and passes.
    """
    for name, (value, least) in limits.items():
        if value is not None and value < least:
            raise ConfigurationError(f"{name} must be >= {least}, got {value}")


class ModelError(AgentLoopsError):
    """The model provider failed after its own retries. The cause is chained."""

    def __init__(self, message: str, *, request_id: str | None = None, status: int | None = None):
        super().__init__(message)
        self.request_id = request_id
        self.status = status


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


class CheckpointError(AgentLoopsError):
    """A saved run that cannot be loaded: unknown, corrupted, or from a newer schema."""

    def __init__(self, message: str, *, run_id: str):
        super().__init__(message)
        self.run_id = run_id


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
    """The run spent its token budget."""


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
    `.calls` holds the calls; `resume(run_id, {call_id: True or False})` decides."""

    def __init__(self, message: str, *, calls: list[Any], policy: str = "ask", result: Any = None):
        super().__init__(message, result=result)
        self.calls = calls
        self.policy = policy
        """The tool's `on_doubt`: "ask" (the run waits for a person, status "in_doubt")
        or "fail" (the run failed, status "failed"; a decision still resumes it)."""


class ToolStepFailed(RunError):
    """A tool step failed and the run was configured to abort on tool errors."""


STOP_ERRORS: dict[str, type[RunError]] = {
    "max_steps": StepLimitExceeded,
    "max_tool_calls": StepLimitExceeded,
    "empty": EmptyReply,
    "budget": BudgetExceeded,
    "stalled": RunStalled,
    "approval_required": ApprovalRequired,
    "refused": ModelRefused,
    "max_tokens": OutputTruncated,
    "context_window": OutputTruncated,
    "tool_failed": ToolStepFailed,
}
"""The error each loop's `raise_for_stop` raises per `stop_reason` (others: `RunError`)."""


def raise_for_stop(result: Any) -> None:
    """Raise the `RunError` matching `result.stop_reason`, carrying `result`, unless it answered."""
    if result.stop_reason != "answered":
        error = STOP_ERRORS.get(result.stop_reason, RunError)
        raise error(result.detail or result.stop_reason, result=result)
