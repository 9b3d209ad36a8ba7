"""OpenTelemetry spans from run events, following the GenAI semantic conventions.

`OTelSink` is an event sink: pass it as `on_event` and every run becomes a span
(`invoke_agent`), with a child span per model call (`chat`, with token usage including
cache reads and writes) and per tool call (`execute_tool`, an error status when the
tool failed). Needs the `otel` extra; nothing else in agentloops imports this module.

Only names, ids, counts and outcomes are recorded: no prompts, tool arguments or tool
outputs (where secrets would be), and this module never sees an API key or a header.

Rule: a kit; it knows events and the model boundary's records, and no loop, driver or store.
"""

from __future__ import annotations

import threading
from typing import Any

try:
    from opentelemetry import context, trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
except ModuleNotFoundError as exc:  # say which extra brings it, not just what is missing
    raise ModuleNotFoundError(
        f"agentloops.otel needs OpenTelemetry ({exc.name} is not installed): "
        "pip install 'agentloops-kit[otel]'",
        name=exc.name,
    ) from exc

from agentloops.events import (
    ApprovalRequested,
    Event,
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
)
from agentloops.usage import Usage

_OK_RUNS = frozenset({"answered", "approval_required"})
"""Every other stop reason (any loop's) marks the run span as an error."""


class OTelSink:
    """Turns agentloops events into OpenTelemetry spans. Thread-safe.

    Args:
        tracer: where spans go; default `trace.get_tracer("agentloops")` from the global
            tracer provider.
        provider_name: `gen_ai.provider.name` for model spans, e.g. `"anthropic"` or
            `"openai"` (left out when `None`).

    Spans: `invoke_agent {loop}` per run (`RunStarted` to `RunFinished`, nested under
    its `parent_run_id`'s span: a sub-run of an agent tool or a handoff under the
    `execute_tool` span of the call that made it), `chat {model}` per model call and
    `execute_tool {name}` per tool call, both children of their run's span, and
    `step {step_id}` per plan step. Plans, re-plans and approval pauses are span events
    on the run span.
    `gen_ai.usage.input_tokens` counts all input tokens, cached ones included, as the
    conventions ask; `gen_ai.usage.cache_read.input_tokens` and
    `gen_ai.usage.cache_creation.input_tokens` give the cached parts.

    A run that raised ends no span by itself: call `close()` (or use the sink as a
    context manager) to end whatever is still open, marked as an error.

    Examples:
        >>> from agentloops import ReActLoop
        >>> from agentloops.testing import ScriptedModel
        >>> with OTelSink() as sink:
        ...     ReActLoop(ScriptedModel(["hi"]), [], on_event=sink).run("hello").answer
        'hi'
    """

    def __init__(self, tracer: Tracer | None = None, *, provider_name: str | None = None):
        self.tracer = tracer or trace.get_tracer("agentloops")
        self.provider_name = provider_name
        self._lock = threading.Lock()
        self._runs: dict[str, Span] = {}
        self._children: dict[tuple[str, str], Span] = {}

    def __call__(self, event: Event) -> None:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    # -- runs ----------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.loop,
            "agentloops.run.id": event.run_id,
        }
        if event.parent_run_id:
            attributes["agentloops.run.parent_id"] = event.parent_run_id
        if event.parent_call_id:
            attributes["gen_ai.tool.call.id"] = event.parent_call_id
        with self._lock:
            parent = self._runs.get(event.parent_run_id or "")
            if event.parent_call_id:  # a sub-run: inside the tool call that made it
                key = (event.parent_run_id or "", f"tool:{event.parent_call_id}")
                parent = self._children.get(key, parent)
            span = self.tracer.start_span(
                f"invoke_agent {event.loop}",
                context=_inside(parent),
                kind=SpanKind.INTERNAL,
                attributes=attributes,
            )
            self._runs[event.run_id] = span

    def _run_finished(self, event: RunFinished) -> None:
        with self._lock:
            span = self._runs.pop(event.run_id, None)
            orphans = [k for k in self._children if k[0] == event.run_id]
            children = [self._children.pop(k) for k in orphans]
        for child in children:  # a call that never finished (the run stopped around it)
            _end(child, "unfinished")
        if span is None:
            return
        span.set_attribute("agentloops.stop_reason", event.stop_reason)
        span.set_attribute("agentloops.model_calls", event.model_calls)
        _set_usage(span, event.usage)
        _end(span, None if event.stop_reason in _OK_RUNS else event.stop_reason)

    # -- model calls, tool calls and steps -----------------------------------------

    def _model_started(self, event: ModelCallStarted) -> None:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if self.provider_name:
            attributes["gen_ai.provider.name"] = self.provider_name
        self._start(event.run_id, f"model:{event.step}", "chat", SpanKind.CLIENT, attributes)

    def _model_finished(self, event: ModelCallFinished) -> None:
        span = self._pop(event.run_id, f"model:{event.step}")
        if span is None:
            return
        if event.model:
            span.update_name(f"chat {event.model}")
            span.set_attribute("gen_ai.response.model", event.model)
        span.set_attribute("gen_ai.response.finish_reasons", [event.stop_reason])
        _set_usage(span, event.usage)
        if event.cost is not None:  # exact, as text: a float would round it
            span.set_attribute("agentloops.cost", str(event.cost))
        if event.attempts:  # a fallback chain's models that failed before this one answered
            span.set_attribute("agentloops.fallback.failed", [a.model for a in event.attempts])
            span.set_attribute("agentloops.fallback.kinds", [a.kind for a in event.attempts])
        _end(span, None)

    def _tool_started(self, event: ToolCallStarted) -> None:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.name,
            "gen_ai.tool.call.id": event.call_id,
            "gen_ai.tool.type": "function",
        }
        name = f"execute_tool {event.name}"
        self._start(event.run_id, f"tool:{event.call_id}", name, SpanKind.INTERNAL, attributes)

    def _tool_finished(self, event: ToolCallFinished) -> None:
        span = self._pop(event.run_id, f"tool:{event.call_id}")
        if span is not None:
            _end(span, "tool_error" if event.outcome.is_error else None)

    def _step_started(self, event: StepStarted) -> None:
        attributes = {"agentloops.step.id": event.step_id}
        name = f"step {event.step_id}"
        self._start(event.run_id, f"step:{event.step_id}", name, SpanKind.INTERNAL, attributes)

    def _step_finished(self, event: StepFinished) -> None:
        span = self._pop(event.run_id, f"step:{event.step_id}")
        if span is not None:
            _end(span, None if event.ok else "step_failed")

    def _annotate(self, event: Event) -> None:
        with self._lock:
            span = self._runs.get(event.run_id)
        if span is None:
            return
        if isinstance(event, Replanned):
            # the count only: a problem can quote a tool argument
            span.add_event("replanned", {"attempt": event.attempt, "problems": len(event.problems)})
        elif isinstance(event, ApprovalRequested):
            names = [getattr(c, "name", "") for c in event.calls]
            span.add_event("approval_requested", {"gen_ai.tool.names": names})
        else:
            span.add_event("plan_made")

    def _start(
        self, run_id: str, key: str, name: str, kind: SpanKind, attributes: dict[str, Any]
    ) -> None:
        with self._lock:
            parent = self._runs.get(run_id)
            span = self.tracer.start_span(
                name, context=_inside(parent), kind=kind, attributes=attributes
            )
            stale = self._children.pop((run_id, key), None)
            self._children[(run_id, key)] = span
        if stale is not None:  # the same key again: the earlier call raised before finishing
            _end(stale, "unfinished")

    def _pop(self, run_id: str, key: str) -> Span | None:
        with self._lock:
            return self._children.pop((run_id, key), None)

    # -- lifetime ------------------------------------------------------------------

    def close(self) -> None:
        """End every span still open (runs that raised), marked as errors."""
        with self._lock:
            spans = [*self._children.values(), *self._runs.values()]
            self._children.clear()
            self._runs.clear()
        for span in spans:
            _end(span, "unfinished")

    def __enter__(self) -> OTelSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _inside(parent: Span | None) -> context.Context | None:
    return trace.set_span_in_context(parent) if parent is not None else None


def _set_usage(span: Span, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.total_input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)


def _end(span: Span, error: str | None) -> None:
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


_HANDLERS: dict[type[Event], Any] = {
    RunStarted: OTelSink._run_started,
    RunFinished: OTelSink._run_finished,
    ModelCallStarted: OTelSink._model_started,
    ModelCallFinished: OTelSink._model_finished,
    ToolCallStarted: OTelSink._tool_started,
    ToolCallFinished: OTelSink._tool_finished,
    StepStarted: OTelSink._step_started,
    StepFinished: OTelSink._step_finished,
    PlanMade: OTelSink._annotate,
    Replanned: OTelSink._annotate,
    ApprovalRequested: OTelSink._annotate,
}
