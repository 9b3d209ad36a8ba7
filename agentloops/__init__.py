"""agentloops: ReAct, ReWOO and Plan-and-Execute agent loops, hand-written and small.

Import what you need from here: `from agentloops import ReActLoop, tool`.
Importing has no side effects and does not import any provider SDK: provider clients
(`AnthropicModel`) load on first access, and their SDK only when one is built.
"""

import typing as _typing

from agentloops.errors import (
    AgentLoopsError,
    ApprovalRequired,
    BudgetExceeded,
    CheckpointError,
    ConfigurationError,
    ModelError,
    ModelOutputError,
    ModelRefused,
    OutputTruncated,
    PlanValidationError,
    RunError,
    RunStalled,
    StepLimitExceeded,
    ToolStepFailed,
    TranscriptError,
)
from agentloops.events import (
    ApprovalRequested,
    Event,
    EventSink,
    JSONLSink,
    ModelCallFinished,
    ModelCallStarted,
    PlanMade,
    Replanned,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
    event_to_dict,
)
from agentloops.messages import (
    Block,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    validate_transcript,
)
from agentloops.model import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    StopReason,
    ToolSpec,
    Usage,
)
from agentloops.react import ReActLoop, ReActResult
from agentloops.structured import StructuredReply, ask_structured, output_schema
from agentloops.tools import ApprovalPolicy, Decision, Tool, ToolOutcome, ToolRegistry, tool

if _typing.TYPE_CHECKING:  # pragma: no cover
    from agentloops.providers.anthropic import AnthropicModel

_LAZY = {"AnthropicModel": "agentloops.providers.anthropic"}
"""Public names loaded on first access (module-level `__getattr__`, PEP 562)."""


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentloops' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "AgentLoopsError",
    "AnthropicModel",
    "ApprovalPolicy",
    "ApprovalRequested",
    "ApprovalRequired",
    "Block",
    "BudgetExceeded",
    "CheckpointError",
    "ConfigurationError",
    "Decision",
    "Event",
    "EventSink",
    "JSONLSink",
    "Message",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelClient",
    "ModelError",
    "ModelOutputError",
    "ModelRefused",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "OutputTruncated",
    "PlanMade",
    "PlanValidationError",
    "ReActLoop",
    "ReActResult",
    "RedactedThinking",
    "Replanned",
    "RunError",
    "RunFinished",
    "RunStalled",
    "RunStarted",
    "StepFinished",
    "StepLimitExceeded",
    "StepStarted",
    "StopReason",
    "StructuredReply",
    "Text",
    "Thinking",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "ToolStepFailed",
    "TranscriptError",
    "Usage",
    "ask_structured",
    "event_to_dict",
    "output_schema",
    "tool",
    "validate_transcript",
]
