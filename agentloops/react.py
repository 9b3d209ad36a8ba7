"""ReAct: the model decides after every observation.

One model call per step; the tool calls of a turn run concurrently and their results
go back in one user message, in the order asked. The loop stops on an answer, at a
hard step limit, on a spent token budget, when the model repeats itself, or when a
tool call needs a human.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentloops._react_result import ReActResult, ReActStopReason
from agentloops.errors import AgentLoopsError, ConfigurationError, check_limits
from agentloops.events import (
    ApprovalRequested,
    EventSink,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
    complete_with_events,
    emit,
)
from agentloops.messages import Message, Text, ToolCall, ToolResult, validate_transcript
from agentloops.model import ModelClient, ModelRequest, ModelResponse, Usage, answer_stop
from agentloops.tools import ApprovalPolicy, Tool, ToolOutcome, ToolRegistry

__all__ = ["ReActLoop", "ReActResult", "ReActStopReason"]

_CUT = "not run: your reply was cut off by the output limit before this call was complete"
_REFUSED = "not run: the reply that asked for this call was a refusal"
_NO_TOOLS = "not run: tools are disabled for this final answer"
_DENIED = "denied: this call was not approved, so it did not run"
_FINAL = "The step limit is reached. Answer now from what you have; no more tools."


@dataclass(kw_only=True)
class _Run:
    messages: list[Message]
    run_id: str
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0
    tool_calls: int = 0
    steps: int = 0
    seen_ids: set[str] = field(init=False)
    last_turn: Any = None
    repeats: int = 0
    started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.seen_ids = {c.id for m in self.messages for c in m.tool_calls}


class ReActLoop:
    """Reason, act, observe: one model call per step until the model answers.

    Args:
        model: any `ModelClient`.
        tools: a `ToolRegistry`, or `Tool`s and typed functions.
        system: the system prompt.
        max_steps: model turns allowed before the run stops with `"max_steps"`.
        max_parallel_tools: how many tool calls of one turn run at once.
        max_total_tokens: stop with `"budget"` before a call once this many tokens are spent.
        max_repeats: stop with `"stalled"` when the same calls get the same results this
            many turns in a row (`None` turns the guard off).
        answer_at_limit: at the step limit, make one last call with tools disabled so the
            run ends with an answer (its `stop_reason` stays `"max_steps"`).
        max_tokens: output limit per model call (`None`: the client's default).
        approval: decides each call: "allow", "deny" or "ask". Tools marked
            `requires_approval=True` always ask unless the policy denies them.
        on_event: receives every `Event`.

    Examples:
        >>> from agentloops.testing import ScriptedModel
        >>> ReActLoop(ScriptedModel(["Paris."]), []).run("Capital of France?").answer
        'Paris.'
    """

    def __init__(
        self,
        model: ModelClient,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        *,
        system: str = "",
        max_steps: int = 20,
        max_parallel_tools: int = 8,
        max_total_tokens: int | None = None,
        max_repeats: int | None = 3,
        answer_at_limit: bool = False,
        max_tokens: int | None = None,
        approval: ApprovalPolicy | None = None,
        on_event: EventSink | None = None,
    ):
        check_limits(
            max_steps=(max_steps, 1),
            max_parallel_tools=(max_parallel_tools, 1),
            max_total_tokens=(max_total_tokens, 1),
            max_repeats=(max_repeats, 2),
        )
        self.model = model
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.system = system
        self.max_steps = max_steps
        self.max_parallel_tools = max_parallel_tools
        self.max_total_tokens = max_total_tokens
        self.max_repeats = max_repeats
        self.answer_at_limit = answer_at_limit
        self.max_tokens = max_tokens
        self.approval = approval
        self.on_event = on_event
        self._resumed: set[tuple[str, str]] = set()
        self._resume_lock = threading.Lock()

    def run(
        self,
        task: str | Sequence[Message],
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """Run until an answer or a stop. `task` is a question, or a transcript ending on a
        user turn (for example an earlier result's `messages` plus a new question).
        `parent_run_id` names the run this one is part of (it goes on `RunStarted`)."""
        if isinstance(task, str):
            messages = [Message.user(task)]
        else:
            messages = list(task)
            validate_transcript(messages)
            if messages[-1].role != "user":
                raise ConfigurationError("a transcript passed to run() must end on a user turn")
        run = _Run(messages=messages, run_id=run_id or os.urandom(6).hex())
        self._emit_start(run, parent_run_id)
        return self._guarded(run, lambda: self._loop(run))

    def resume(
        self,
        result: ReActResult,
        decisions: dict[str, bool],
        *,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """Continue a run paused with `"approval_required"`.

        `decisions` maps each pending call id to True (run it, exactly as shown) or False
        (deny it: the model gets an error result saying so).

        Raises:
            ConfigurationError: the result is not paused, a decision names no pending call,
                a pending call has no decision, a decision is not a bool, or this pause was
                already resumed by this loop.
        """
        if result.stop_reason != "approval_required":
            raise ConfigurationError(f"only a paused run can resume, not {result.stop_reason!r}")
        pending = {c.id: c for c in result.pending_approvals}
        unknown = sorted(set(decisions) - set(pending))
        if unknown:
            raise ConfigurationError(
                f"no pending call with id {unknown}; pending: {sorted(pending)}"
            )
        missing = sorted(set(pending) - set(decisions))
        if missing:
            raise ConfigurationError(f"no decision for pending calls {missing}")
        not_bool = sorted(k for k, v in decisions.items() if not isinstance(v, bool))
        if not_bool:  # a truthy "no" must never approve a call
            raise ConfigurationError(f"decisions must be True or False; not for {not_bool}")
        turn = result.messages[-1]
        shown = {c.id: c for c in turn.tool_calls}
        if any(shown.get(i) != c for i, c in pending.items()):
            raise ConfigurationError("pending calls do not match the transcript's last turn")
        if set(shown) != set(pending) | {r.call_id for r in result.held_results}:
            raise ConfigurationError("the paused turn has calls that are neither held nor pending")
        key = (result.run_id, ",".join(sorted(pending)))
        with self._resume_lock:
            if key in self._resumed:
                raise ConfigurationError(f"run {result.run_id} was already resumed from this pause")
            self._resumed.add(key)
        run = _Run(
            messages=list(result.messages),
            run_id=result.run_id,
            usage=result.usage,
            model_calls=result.model_calls,
            tool_calls=result.tool_calls,
            steps=result.steps,
        )
        self._emit_start(run, parent_run_id)

        def finish_turn() -> ReActResult:
            decided, _ = self._act(run, list(pending.values()), lambda c: _verdict(decisions[c.id]))
            done = {r.call_id: r for r in (*result.held_results, *decided)}
            results = [done[c.id] for c in turn.tool_calls]
            run.messages.append(Message("user", tuple(results)))
            self._stalled(run, turn.tool_calls, results)  # counts from here: a pause resets it
            return self._loop(run)

        return self._guarded(run, finish_turn)

    # -- the loop ------------------------------------------------------------------

    def _guarded(self, run: _Run, body: Callable[[], ReActResult]) -> ReActResult:
        """Run `body`; a failure carries the partial result and still ends the run's events."""
        try:
            return body()
        except AgentLoopsError as exc:
            partial = self._finish(run, "error", f"{type(exc).__name__}: {exc}")
            if exc.result is None:
                exc.result = partial
            raise

    def _loop(self, run: _Run) -> ReActResult:
        specs = self.tools.specs()
        # One request serves every step: its `messages` is the live transcript.
        request = ModelRequest(self.system, run.messages, specs, "auto", self.max_tokens)
        while True:
            if run.steps >= self.max_steps:
                return self._at_limit(run, request)
            if (
                self.max_total_tokens is not None
                and run.usage.total_tokens >= self.max_total_tokens
            ):
                detail = (
                    f"max_total_tokens={self.max_total_tokens} reached "
                    f"after {run.usage.total_tokens} tokens"
                )
                return self._finish(run, "budget", detail)
            response = self._call_model(run, request)
            run.steps += 1
            message = response.message
            calls = message.tool_calls
            reason = response.stop_reason
            if not calls:
                run.messages.append(message)
                if reason == "pause_turn":
                    continue  # the provider paused a long turn; sending it back continues it
                return self._finish(run, answer_stop(reason), f"model stop_reason={reason}")
            message, calls = _unique_ids(run, message, calls)
            run.messages.append(message)
            if reason == "refusal":
                run.messages.append(_unanswered(calls, _REFUSED))
                return self._finish(run, "refused", "model stop_reason=refusal")
            if reason in ("max_tokens", "context_window"):
                run.messages.append(_unanswered(calls, _CUT))
                continue
            results, pending = self._act(run, calls)
            if pending:
                return self._pause(run, pending, results)
            run.messages.append(Message("user", tuple(results)))
            if self._stalled(run, calls, results):
                return self._finish(run, "stalled", self._stall_detail())

    def _act(
        self,
        run: _Run,
        calls: list[ToolCall],
        decide: Callable[[ToolCall], str] | None = None,
    ) -> tuple[list[ToolResult], list[ToolCall]]:
        """Results for the calls decided now, and the calls that wait for a human."""
        if decide is None:
            if not self._needs_policy(calls):
                return self._results(run, calls), []
            decide = self._decide
        decisions = {c.id: decide(c) for c in calls}
        ran = {
            r.call_id: r
            for r in self._results(run, [c for c in calls if decisions[c.id] == "allow"])
        }
        results = [
            ran[c.id] if decisions[c.id] == "allow" else ToolResult(c.id, _DENIED, True)
            for c in calls
            if decisions[c.id] != "ask"
        ]
        return results, [c for c in calls if decisions[c.id] == "ask"]

    def _needs_policy(self, calls: list[ToolCall]) -> bool:
        if self.approval is not None:
            return True
        get = self.tools.get
        for c in calls:  # a plain loop: a generator here costs more than the check
            t = get(c.name)
            if t is not None and t.requires_approval:
                return True
        return False

    def _decide(self, call: ToolCall) -> str:
        decision = self.approval(call) if self.approval is not None else "allow"
        if decision not in ("allow", "deny", "ask"):
            raise ConfigurationError(f"approval policy returned {decision!r} for {call.name!r}")
        t = self.tools.get(call.name)
        if decision == "allow" and t is not None and t.requires_approval:
            return "ask"
        return decision

    def _results(self, run: _Run, calls: list[ToolCall]) -> list[ToolResult]:
        """Run calls concurrently (bounded); results in the order asked."""
        run.tool_calls += len(calls)
        if len(calls) == 1:  # the common case: one call runs inline, without lists or a pool
            o = self._run_call(run, calls[0])
            return [ToolResult(calls[0].id, o.content, o.is_error)]
        if not calls:  # all were denied or wait for approval
            return []
        workers = min(len(calls), self.max_parallel_tools)
        with ThreadPoolExecutor(workers, thread_name_prefix="agentloops-react") as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, self._run_call, run, c) for c in calls
            ]
            outcomes = [f.result() for f in futures]
        return [
            ToolResult(c.id, o.content, o.is_error) for c, o in zip(calls, outcomes, strict=True)
        ]

    def _run_call(self, run: _Run, call: ToolCall) -> ToolOutcome:
        sink = self.on_event
        if sink is None:
            return self.tools.call(call.name, call.args)
        sink(
            ToolCallStarted(
                loop="react", run_id=run.run_id, call_id=call.id, name=call.name, args=call.args
            )
        )
        outcome = self.tools.call(call.name, call.args)
        sink(
            ToolCallFinished(
                loop="react", run_id=run.run_id, call_id=call.id, name=call.name, outcome=outcome
            )
        )
        return outcome

    def _call_model(self, run: _Run, request: ModelRequest) -> ModelResponse:
        response = complete_with_events(
            self.model, request, self.on_event, "react", run.run_id, run.steps
        )
        run.model_calls += 1
        run.usage = run.usage + response.usage
        return response

    def _at_limit(self, run: _Run, request: ModelRequest) -> ReActResult:
        detail = f"max_steps={self.max_steps} reached after {run.steps} steps"
        if not self.answer_at_limit:
            return self._finish(run, "max_steps", detail)
        last = run.messages[-1]
        if last.role == "user":  # the note goes after the tool results, in the same turn
            run.messages[-1] = Message("user", (*last.content, Text(_FINAL)))
        else:  # the limit came right after a paused (pause_turn) assistant turn
            run.messages.append(Message.user(_FINAL))
        response = self._call_model(run, dataclasses.replace(request, tool_choice="none"))
        run.messages.append(response.message)
        if response.message.tool_calls:  # a server that ignores tool_choice="none"
            run.messages.append(_unanswered(response.message.tool_calls, _NO_TOOLS))
        return self._finish(run, "max_steps", detail)

    def _stalled(self, run: _Run, calls: list[ToolCall], results: list[ToolResult]) -> bool:
        if self.max_repeats is None:
            return False
        turn = [
            (c.name, c.args, r.content, r.is_error) for c, r in zip(calls, results, strict=True)
        ]
        run.repeats = run.repeats + 1 if turn == run.last_turn else 1
        run.last_turn = turn
        return run.repeats >= self.max_repeats

    def _stall_detail(self) -> str:
        n = self.max_repeats
        return f"max_repeats={n}: the same calls got the same results {n} turns in a row"

    # -- results and events --------------------------------------------------------

    def _pause(self, run: _Run, pending: list[ToolCall], held: list[ToolResult]) -> ReActResult:
        emit(self.on_event, ApprovalRequested, loop="react", run_id=run.run_id, calls=pending)
        names = ", ".join(c.name for c in pending)
        detail = f"{len(pending)} tool call(s) wait for approval: {names}"
        return self._finish(run, "approval_required", detail, pending=pending, held=held)

    def _result(
        self,
        run: _Run,
        stop_reason: ReActStopReason,
        detail: str,
        pending: list[ToolCall] | None = None,
        held: list[ToolResult] | None = None,
    ) -> ReActResult:
        last = run.messages[-1]
        # A paused turn's text is a preamble to its pending calls, not an answer.
        answered = last.role == "assistant" and stop_reason != "approval_required"
        return ReActResult(
            answer=last.text if answered else "",
            stop_reason=stop_reason,
            messages=run.messages,
            usage=run.usage,
            model_calls=run.model_calls,
            tool_calls=run.tool_calls,
            steps=run.steps,
            run_id=run.run_id,
            detail=detail,
            pending_approvals=pending or [],
            held_results=held or [],
        )

    def _finish(
        self, run: _Run, stop_reason: ReActStopReason, detail: str, **kw: Any
    ) -> ReActResult:
        result = self._result(run, stop_reason, detail, **kw)
        emit(
            self.on_event,
            RunFinished,
            loop="react",
            run_id=run.run_id,
            stop_reason=stop_reason,
            usage=run.usage,
            model_calls=run.model_calls,
            seconds=time.perf_counter() - run.started,
        )
        return result

    def _emit_start(self, run: _Run, parent: str | None) -> None:
        emit(self.on_event, RunStarted, loop="react", run_id=run.run_id, parent_run_id=parent)


def _verdict(approved: bool) -> str:
    return "allow" if approved else "deny"


def _unanswered(calls: list[ToolCall], why: str) -> Message:
    return Message("user", tuple(ToolResult(c.id, why, True) for c in calls))


def _unique_ids(
    run: _Run, message: Message, calls: list[ToolCall]
) -> tuple[Message, list[ToolCall]]:
    """Give reused call ids a suffix, so every call can be answered (a protocol repair)."""
    seen = run.seen_ids
    if len(calls) == 1 and calls[0].id not in seen:  # the common case, without a set
        seen.add(calls[0].id)
        return message, calls
    ids = [c.id for c in calls]
    if len(set(ids)) == len(ids) and seen.isdisjoint(ids):
        seen.update(ids)
        return message, calls
    blocks: list[Any] = []
    for b in message.content:
        if type(b) is ToolCall:
            new_id, n = b.id, 1
            while new_id in seen:
                n += 1
                new_id = f"{b.id}_{n}"
            seen.add(new_id)
            b = ToolCall(new_id, b.name, b.args)
        blocks.append(b)
    message = Message("assistant", tuple(blocks))
    return message, message.tool_calls
