"""What a middleware is: `Middleware`, whose hooks wrap a run's model and tool calls, and
`MiddlewareContext`, what each hook is told about the call it wraps.

Rule: records and the hooks' defaults; no driver, no loop, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentloops.engine.effects import CallModel, Machine
from agentloops.errors import ModelError
from agentloops.messages import Message, ToolCall, ToolOutcome
from agentloops.model import ModelClient, ModelRequest, ModelResponse

if TYPE_CHECKING:
    from agentloops.events import Event


class MiddlewareContext:
    """What a hook is told about the call it wraps, and what it may do besides.

    Attributes:
        run_id: the run the call belongs to (a Plan-and-Execute step's own id for its calls).
        loop: the loop's name ("react", "rewoo", "plan_execute", "router", "evaluator").
        role: what the call is for (`ModelRequest.role`: "react", "planner", "solver"...);
            for a tool hook, the role of the run's last model call.
        step: the model call's step (its number in the run's journal); for a tool hook,
            the last model call's.
        parent_run_id: the run this one is part of, if any.
        task: the run's task (a string, or the transcript it was given).
        client: the model client of the call (`None` in a tool hook): a hook may call it
            through `call_model` (compaction's summary) or read its `count_tokens`.
        state: this middleware's own dict for this run, kept between its hooks' calls
            (rebuilt on replay, as everything a hook computes from the run is).
        observed: whether anyone listens to the run's events (`emit` drops them if not).
    """

    __slots__ = (
        "_events",
        "client",
        "loop",
        "observed",
        "parent_run_id",
        "role",
        "run_id",
        "state",
        "step",
        "task",
    )

    def __init__(
        self,
        *,
        run_id: str,
        loop: str,
        role: str,
        step: int,
        parent_run_id: str | None,
        task: str | Sequence[Message],
        client: ModelClient | None,
        state: dict[str, Any],
        observed: bool,
        events: list[Event],
    ):
        self.run_id, self.loop, self.role, self.step = run_id, loop, role, step
        self.parent_run_id, self.task, self.client = parent_run_id, task, client
        self.state, self.observed = state, observed
        self._events = events

    def emit(self, event: Event) -> None:
        """Hand `event` to whoever listens (yielded by the wrapper as the hook returns;
        dropped when nobody listens)."""
        if self.observed:
            self._events.append(event)

    def call_model(self, request: ModelRequest, *, role: str = "") -> Machine[ModelResponse]:
        """A model call of the hook's own (`response = yield from ctx.call_model(...)`):
        journaled as any model call of the run, with the call's run id and step and
        `role` (default: the request's), metered, and counted in the run's totals.

        Raises:
            ConfigurationError: a tool hook (there is no client to call).
        """
        if self.client is None:
            from agentloops.errors import ConfigurationError

            raise ConfigurationError("call_model is for model hooks: a tool hook has no client")
        if role:
            request = dataclasses.replace(request, role=role)
        effect = CallModel(
            self.client,
            request,
            self.loop,
            self.run_id,
            self.step,
            parent_run_id=self.parent_run_id,
        )
        response: ModelResponse = yield effect
        return response


class Middleware:
    """Wraps every model and tool call of a run: give a list as `middleware=[...]`.

    Every hook is optional: the defaults pass the call through. A model hook may be a
    generator that yields effects (`yield from ctx.call_model(...)`, a guard's check) and
    returns its value. Hooks run inside the run's machine, so what they compute from the
    run is computed again, the same, when a durable run is replayed; what they learn
    from outside (a model call of their own, a guard's verdict) is journaled.

    In a chain `[a, b]`, `a.before_model` runs first (outermost), then `b`'s; the after
    hooks run in reverse (`b` then `a`). See docs/middleware.md.
    """

    name: str = ""
    """The middleware's name in events and in the run's fingerprint (default: its class's)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    def before_model(
        self, request: ModelRequest, ctx: MiddlewareContext
    ) -> ModelRequest | Machine[ModelRequest]:
        """The request to send instead of `request` (the messages, system prompt and tools
        the model sees); the run's own transcript is not changed."""
        return request

    def after_model(
        self, request: ModelRequest, response: ModelResponse, ctx: MiddlewareContext
    ) -> ModelResponse:
        """The response the run gets instead of `response` (for `request`, as sent)."""
        return response

    def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> ToolCall | ToolOutcome:
        """The call to run instead (same id: other arguments), or an outcome that answers
        it without running it."""
        return call

    def after_tool(
        self, call: ToolCall, outcome: ToolOutcome, ctx: MiddlewareContext
    ) -> ToolOutcome:
        """The outcome the model reads instead of `outcome`."""
        return outcome

    def on_model_error(
        self, request: ModelRequest, error: ModelError, ctx: MiddlewareContext
    ) -> ModelRequest | Machine[ModelRequest | None] | None:
        """A request to try once more after `error` (e.g. compacted after a
        `ContextWindowExceeded`), or `None` to let the error go on."""
        return None

    def fingerprint(self) -> Mapping[str, object]:
        """The settings a run's decisions depend on: kept in a durable run's fingerprint
        (under "middleware"), so a resume under other settings is refused."""
        return {}


HOOKS = ("before_model", "after_model", "before_tool", "after_tool", "on_model_error")


def overrides(middleware: object, hook: str) -> bool:
    """Whether `middleware` does something in `hook` (not the pass-through default)."""
    own: Callable[..., Any] | None = getattr(type(middleware), hook, None)
    return own is not None and own is not getattr(Middleware, hook)


def fingerprint_of(middleware: object) -> tuple[str, Mapping[str, object]]:
    fp = getattr(middleware, "fingerprint", None)
    return name_of(middleware), dict(fp()) if fp is not None else {}


def name_of(middleware: object) -> str:
    return getattr(middleware, "name", "") or type(middleware).__name__


__all__ = ["HOOKS", "Middleware", "MiddlewareContext", "fingerprint_of", "name_of", "overrides"]
