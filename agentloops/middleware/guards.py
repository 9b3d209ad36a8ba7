"""Guardrails, written on the middleware seam as a user's middleware would be:
`InputGuard` (the task, before the first model call), `OutputGuard` (the answer), and
`ToolGuard` (a tool call's arguments, or its result).

A guard's `check(value, ctx)` is the user's (sync or async; it may call a moderation
service): it returns `None` to pass, or a reason (a string), or raises
`GuardrailTripped(reason)`. The driver performs it as an effect (`CheckGuard`), and a
durable run journals the verdict (`guard_checked`), so a replay never asks again.

Rule: middleware only: it knows the seam and the vocabulary, no driver and no loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from agentloops.engine.effects import Machine
from agentloops.errors import ConfigurationError, GuardrailTripped
from agentloops.events import GuardTripped
from agentloops.messages import Message, ToolCall, ToolOutcome
from agentloops.middleware.hooks import Middleware, MiddlewareContext
from agentloops.model import ModelRequest, ModelResponse

Check = Callable[[Any, MiddlewareContext], Any]
"""`check(value, ctx)`, sync or async: `None` (pass), a reason, or `GuardrailTripped`."""

ANSWER_ROLES = frozenset(("react", "solver", "reporter", "router", "evaluator"))
"""The roles of the calls whose reply is a run's answer: a ReAct run's (not a
Plan-and-Execute step's: "executor"), ReWOO's solver, Plan-and-Execute's reporter, the
router's and the evaluator's one call."""


class _Guard(Middleware):
    def __init__(self, check: Check, name: str | None):
        if not callable(check):
            raise ConfigurationError(f"a guard's check must be callable, got {check!r}")
        self.check = check
        if name is not None:
            self.name = name

    def fingerprint(self) -> Mapping[str, object]:
        return {"check": getattr(self.check, "__qualname__", type(self.check).__name__)}


class InputGuard(_Guard):
    """Checks a run's task before its first model call; a trip stops the run with stop
    reason "guardrail" (and a `GuardTripped` event), before anything is answered.

    The value checked is the task: its text, or for a transcript the text of its last user
    turn. With `parallel=True` the check runs at the same time as the first model call
    under asyncio (`arun`, `astream`), and a trip cancels the call; the sync driver runs
    it first.

    Examples:
        >>> from agentloops import ReActLoop
        >>> from agentloops.testing import ScriptedModel
        >>> guard = InputGuard(lambda task, ctx: "no passwords" if "password" in task else None)
        >>> result = ReActLoop(ScriptedModel([]), middleware=[guard]).run("My password?")
        >>> result.stop_reason, result.detail
        ('guardrail', 'InputGuard tripped (input): no passwords')
    """

    def __init__(self, check: Check, *, parallel: bool = False, name: str | None = None):
        super().__init__(check, name)
        self.parallel = parallel

    def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> Any:
        if ctx.state.get("checked"):
            return request
        ctx.state["checked"] = True
        task = ctx.task if isinstance(ctx.task, str) else _last_user_text(ctx.task)
        if self.parallel:
            ctx.alongside(self.check, task, guard=self.name, stage="input")
            return request
        return self._checked(request, task, ctx)

    def _checked(self, request: ModelRequest, task: str, ctx: MiddlewareContext) -> Machine[Any]:
        reason = yield from ctx.check(self.check, task, guard=self.name, stage="input")
        if reason is not None:
            raise GuardrailTripped(reason, guard=self.name, stage="input")
        return request

    def fingerprint(self) -> Mapping[str, object]:
        return {**super().fingerprint(), "parallel": self.parallel}


class OutputGuard(_Guard):
    """Checks a run's answer (the text of a reply that calls no tool, from a call of one of
    `roles`) before the run takes it; a trip stops the run with stop reason "guardrail",
    its answer left out.

    A typed answer given through the final-answer tool is checked as that call's
    arguments (JSON text)."""

    def __init__(
        self, check: Check, *, roles: Collection[str] = ANSWER_ROLES, name: str | None = None
    ):
        super().__init__(check, name)
        self.roles = frozenset(roles)

    def after_model(
        self, request: ModelRequest, response: ModelResponse, ctx: MiddlewareContext
    ) -> Any:
        if request.role not in self.roles:
            return response
        calls = response.message.tool_calls
        if not calls:
            answer = response.message.text
        elif request.output is not None and [c.name for c in calls] == [request.output.tool]:
            answer = json.dumps(calls[0].args, sort_keys=True)
        else:
            return response  # tools asked for: not an answer yet
        return self._checked(response, answer, ctx)

    def _checked(self, response: ModelResponse, answer: str, ctx: MiddlewareContext) -> Any:
        reason = yield from ctx.check(self.check, answer, guard=self.name, stage="output")
        if reason is not None:
            raise GuardrailTripped(reason, guard=self.name, stage="output")
        return response

    def fingerprint(self) -> Mapping[str, object]:
        return {**super().fingerprint(), "roles": sorted(self.roles)}


class ToolGuard(_Guard):
    """Checks a tool call before it runs (`on="call"`: the `ToolCall`) or its result before
    the model reads it (`on="result"`: the `ToolOutcome`), for the tools named in `tools`
    (default: every tool). A trip turns the call into an error result saying why (the
    call is not run; or its result is withheld), with a `GuardTripped` event; the run
    goes on, and the model reads the error."""

    def __init__(
        self,
        check: Check,
        *,
        on: Literal["call", "result"] = "call",
        tools: Collection[str] | None = None,
        name: str | None = None,
    ):
        super().__init__(check, name)
        if on not in ("call", "result"):
            raise ConfigurationError(f"ToolGuard on= must be 'call' or 'result', got {on!r}")
        if isinstance(tools, str):
            raise ConfigurationError("ToolGuard tools= is a collection of tool names")
        self.on = on
        self.tools = None if tools is None else frozenset(tools)

    def _applies(self, call: ToolCall) -> bool:
        return self.tools is None or call.name in self.tools

    def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> Any:
        if self.on != "call" or not self._applies(call):
            return call
        return self._checked(call, call, "tool_call", ctx)

    def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: MiddlewareContext) -> Any:
        if self.on != "result" or not self._applies(call):
            return outcome
        return self._checked(outcome, outcome, "tool_result", ctx)

    def _checked(self, passed: Any, value: Any, stage: str, ctx: MiddlewareContext) -> Any:
        reason = yield from ctx.check(self.check, value, guard=self.name, stage=stage)
        if reason is None:
            return passed
        ctx.emit(
            GuardTripped(
                loop=ctx.loop,
                run_id=ctx.run_id,
                parent_run_id=ctx.parent_run_id,
                guard=self.name,
                stage=stage,
                reason=reason,
            )
        )
        what = "not run" if stage == "tool_call" else "its result was withheld"
        return ToolOutcome(content=f"{what}: guard {self.name} tripped: {reason}", is_error=True)

    def fingerprint(self) -> Mapping[str, object]:
        tools = None if self.tools is None else sorted(self.tools)
        return {**super().fingerprint(), "on": self.on, "tools": tools}


def _last_user_text(messages: Any) -> str:
    for m in reversed(list(messages)):
        if isinstance(m, Message) and m.role == "user" and m.text:
            return m.text
    return ""


__all__ = ["ANSWER_ROLES", "InputGuard", "OutputGuard", "ToolGuard"]
