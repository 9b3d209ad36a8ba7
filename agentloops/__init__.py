"""agentloops: ReAct, ReWOO and Plan-and-Execute agent loops, hand-written and small.

Import what you need from here: `from agentloops import ReActLoop, tool`.
Importing has no side effects and does not import any provider SDK: provider clients
(`AnthropicModel`, `OpenAICompatModel`) load on first access, and their SDK only when one is built.
ReWOO, Plan-and-Execute, the router, the evaluator, checkpoints, run stores, batches and the
comparison harness also load on first access: `from agentloops import ReWOOPipeline` works as
usual.

Rule: the facade only re-exports; no module of the package imports it (a contract in
pyproject.toml).
"""

import typing as _typing

from agentloops.compaction import Compaction
from agentloops.engine.subruns import AgentTool
from agentloops.errors import (
    AgentLoopsError,
    ApprovalRequired,
    BudgetExceeded,
    CallInDoubt,
    CassetteError,
    CheckpointError,
    ConfigurationError,
    ContextWindowExceeded,
    DeadlineExceeded,
    DecisionRefused,
    EmptyReply,
    GuardrailTripped,
    HandoffCycle,
    InvalidOutput,
    JournalConflict,
    LeaseLost,
    ModelError,
    ModelOutputError,
    ModelRefused,
    ModelRetry,
    OutputTruncated,
    PlanValidationError,
    RecordWriteError,
    RunError,
    RunExists,
    RunLeased,
    RunNotFound,
    RunStalled,
    StepLimitExceeded,
    StoreError,
    ToolStepFailed,
    TranscriptError,
)
from agentloops.events import (
    ApprovalRequested,
    ContextCompacted,
    Event,
    EventSink,
    GuardTripped,
    JSONLSink,
    ModelCallFinished,
    ModelCallStarted,
    OutputDelta,
    PlanMade,
    Replanned,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    event_to_dict,
)
from agentloops.messages import (
    Block,
    Message,
    RedactedThinking,
    SubRun,
    Text,
    Thinking,
    ToolCall,
    ToolOutcome,
    ToolResult,
    validate_transcript,
)
from agentloops.middleware import (
    CachedTools,
    InputGuard,
    Middleware,
    MiddlewareContext,
    OutputGuard,
    ToolGuard,
)
from agentloops.model import (
    AsyncModelClient,
    AsyncStreamingModelClient,
    ModelAttempt,
    ModelClient,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    StopReason,
    StreamingModelClient,
    ToolSpec,
)
from agentloops.output import OutputContext, OutputValidator
from agentloops.react import Handoff, ReActLoop, ReActResult
from agentloops.structured import (
    StructuredReply,
    aask_structured,
    ask_structured,
    ask_text,
    output_schema,
)
from agentloops.tools import (
    ApprovalPolicy,
    ApprovalRule,
    Decision,
    DoubtPolicy,
    Tool,
    ToolOptions,
    ToolRegistry,
    idempotency_key,
    tool,
)
from agentloops.tools.cache import ToolCache
from agentloops.usage import Price, Usage

__version__ = "0.1.0"
"""The installed version; the build reads it from here (pyproject.toml, `[tool.hatch.version]`)."""

if _typing.TYPE_CHECKING:  # pragma: no cover
    from agentloops.batch import BatchItem, DurableItem, run_many
    from agentloops.cassettes import Cassette, CassetteMismatch, CassetteRecorder
    from agentloops.checkpoint import Checkpointer, MemoryCheckpointer, SQLiteCheckpointer
    from agentloops.comparison import Attempt, Comparison, LoopFactory, LoopSummary, compare
    from agentloops.engine.decisions import Waiting, decide, waiting
    from agentloops.evaluator import Evaluator, Verdict
    from agentloops.events.replay import EventReplay, replay_events
    from agentloops.journal import (
        JournalRecord,
        Lease,
        LeaseKeeper,
        MemoryStore,
        PostgresStore,
        RunInfo,
        RunStore,
        SQLiteStore,
    )
    from agentloops.plan_execute import Plan, PlanAndExecute, PlanExecuteResult, PlanStep
    from agentloops.providers.anthropic import AnthropicModel
    from agentloops.providers.fallback import FallbackModel
    from agentloops.providers.limiter import RateLimiter
    from agentloops.providers.openai_compat import OpenAICompatModel
    from agentloops.providers.retry import RetryPolicy
    from agentloops.rewoo import ReWOOPipeline, ReWOOPlan, ReWOOPlanStep, ReWOOResult, validate_plan
    from agentloops.router import RouteDecision, Router
    from agentloops.threads import ThreadSettings, configure_threads

# ReWOO, Plan-and-Execute and the other features load on first access, so that
# `import agentloops` stays cheap for a program that uses part of it (bench/startup.py).
# The comparison harness lives in `agentloops.comparison`, not in a module named `compare`:
# importing a submodule binds its name on the package, which would shadow the function.
_LAZY = {
    "AnthropicModel": "agentloops.providers.anthropic",
    "OpenAICompatModel": "agentloops.providers.openai_compat",
    "FallbackModel": "agentloops.providers.fallback",
    "RateLimiter": "agentloops.providers.limiter",
    "RetryPolicy": "agentloops.providers.retry",
    "BatchItem": "agentloops.batch",
    "DurableItem": "agentloops.batch",
    "Cassette": "agentloops.cassettes",
    "CassetteMismatch": "agentloops.cassettes",
    "CassetteRecorder": "agentloops.cassettes",
    "run_many": "agentloops.batch",
    "Checkpointer": "agentloops.checkpoint",
    "MemoryCheckpointer": "agentloops.checkpoint",
    "SQLiteCheckpointer": "agentloops.checkpoint",
    "Attempt": "agentloops.comparison",
    "Comparison": "agentloops.comparison",
    "LoopFactory": "agentloops.comparison",
    "LoopSummary": "agentloops.comparison",
    "compare": "agentloops.comparison",
    "Evaluator": "agentloops.evaluator",
    "EventReplay": "agentloops.events.replay",
    "replay_events": "agentloops.events.replay",
    "Waiting": "agentloops.engine.decisions",
    "decide": "agentloops.engine.decisions",
    "waiting": "agentloops.engine.decisions",
    "JournalRecord": "agentloops.journal",
    "Lease": "agentloops.journal",
    "LeaseKeeper": "agentloops.journal",
    "MemoryStore": "agentloops.journal",
    "PostgresStore": "agentloops.journal",
    "RunInfo": "agentloops.journal",
    "RunStore": "agentloops.journal",
    "SQLiteStore": "agentloops.journal",
    "Verdict": "agentloops.evaluator",
    "Plan": "agentloops.plan_execute",
    "PlanAndExecute": "agentloops.plan_execute",
    "PlanExecuteResult": "agentloops.plan_execute",
    "PlanStep": "agentloops.plan_execute",
    "ReWOOPipeline": "agentloops.rewoo",
    "ReWOOPlan": "agentloops.rewoo",
    "ReWOOPlanStep": "agentloops.rewoo",
    "ReWOOResult": "agentloops.rewoo",
    "validate_plan": "agentloops.rewoo",
    "RouteDecision": "agentloops.router",
    "Router": "agentloops.router",
    "ThreadSettings": "agentloops.threads",
    "configure_threads": "agentloops.threads",
}
"""Public names loaded on first access (module-level `__getattr__`, PEP 562)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloops' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """The public names, the lazy ones included (they are not in the module's dict)."""
    return sorted({*globals(), *__all__})


__all__ = [
    "AgentLoopsError",
    "AgentTool",
    "AnthropicModel",
    "ApprovalPolicy",
    "ApprovalRequested",
    "ApprovalRequired",
    "ApprovalRule",
    "AsyncModelClient",
    "AsyncStreamingModelClient",
    "Attempt",
    "BatchItem",
    "Block",
    "BudgetExceeded",
    "CachedTools",
    "CallInDoubt",
    "Cassette",
    "CassetteError",
    "CassetteMismatch",
    "CassetteRecorder",
    "CheckpointError",
    "Checkpointer",
    "Compaction",
    "Comparison",
    "ConfigurationError",
    "ContextCompacted",
    "ContextWindowExceeded",
    "DeadlineExceeded",
    "Decision",
    "DecisionRefused",
    "DoubtPolicy",
    "DurableItem",
    "EmptyReply",
    "Evaluator",
    "Event",
    "EventReplay",
    "EventSink",
    "FallbackModel",
    "GuardTripped",
    "GuardrailTripped",
    "Handoff",
    "HandoffCycle",
    "InputGuard",
    "InvalidOutput",
    "JSONLSink",
    "JournalConflict",
    "JournalRecord",
    "Lease",
    "LeaseKeeper",
    "LeaseLost",
    "LoopFactory",
    "LoopSummary",
    "MemoryCheckpointer",
    "MemoryStore",
    "Message",
    "Middleware",
    "MiddlewareContext",
    "ModelAttempt",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelClient",
    "ModelError",
    "ModelOutputError",
    "ModelRefused",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "OpenAICompatModel",
    "OutputContext",
    "OutputDelta",
    "OutputGuard",
    "OutputSchema",
    "OutputTruncated",
    "OutputValidator",
    "Plan",
    "PlanAndExecute",
    "PlanExecuteResult",
    "PlanMade",
    "PlanStep",
    "PlanValidationError",
    "PostgresStore",
    "Price",
    "RateLimiter",
    "ReActLoop",
    "ReActResult",
    "ReWOOPipeline",
    "ReWOOPlan",
    "ReWOOPlanStep",
    "ReWOOResult",
    "RecordWriteError",
    "RedactedThinking",
    "Replanned",
    "RetryPolicy",
    "RouteDecision",
    "Router",
    "RunError",
    "RunExists",
    "RunFinished",
    "RunInfo",
    "RunLeased",
    "RunNotFound",
    "RunStalled",
    "RunStarted",
    "RunStore",
    "SQLiteCheckpointer",
    "SQLiteStore",
    "StepFinished",
    "StepLimitExceeded",
    "StepStarted",
    "StopReason",
    "StoreError",
    "StreamingModelClient",
    "StructuredReply",
    "SubRun",
    "Text",
    "TextDelta",
    "Thinking",
    "ThinkingDelta",
    "ThreadSettings",
    "Tool",
    "ToolCache",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolGuard",
    "ToolOptions",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolStepFailed",
    "TranscriptError",
    "Usage",
    "Verdict",
    "Waiting",
    "aask_structured",
    "ask_structured",
    "ask_text",
    "compare",
    "configure_threads",
    "decide",
    "event_to_dict",
    "idempotency_key",
    "output_schema",
    "replay_events",
    "run_many",
    "tool",
    "validate_plan",
    "validate_transcript",
    "waiting",
]
