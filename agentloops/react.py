"""ReAct: the model decides after every observation.

One model call per step; the tool calls of a turn run concurrently and their results
go back in one user message, in the order asked. The loop stops on an answer, at a
hard step limit, on a spent token budget, when the model repeats itself, or when a
tool call needs a human.

The decisions live once, in a step machine (`ReActLoop.machine`); `run`, `arun`,
`stream` and `astream` are drivers that perform what it asks for.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any

from agentloops import _resumed
from agentloops._react_result import ReActResult, ReActStopReason
from agentloops.engine import session
from agentloops.engine.effects import CallModel, Decide, Emit, Machine, NextTool, StartTool
from agentloops.engine.host import ToolHost
from agentloops.engine.runs import Clock, Totals, call_model, lifecycle, run_tools
from agentloops.errors import AgentLoopsError, ConfigurationError, check_limits
from agentloops.events import ApprovalRequested, Event, EventSink
from agentloops.journal import RunStore
from agentloops.messages import (
    Message,
    Text,
    ToolCall,
    ToolResult,
    _tool_result,
    _user_turn,
    message_from_dict,
    message_to_dict,
    validate_transcript,
)
from agentloops.model import ModelClient, ModelRequest, answer_stop
from agentloops.tools import ApprovalPolicy, Tool, ToolRegistry

__all__ = ["ReActLoop", "ReActResult", "ReActStopReason"]

_LOOP = "react"
_CUT = "not run: your reply was cut off by the output limit before this call was complete"
_REFUSED = "not run: the reply that asked for this call was a refusal"
_NO_TOOLS = "not run: tools are disabled for this final answer"
_DENIED = "denied: this call was not approved, so it did not run"
_FINAL = "The step limit is reached. Answer now from what you have; no more tools."
_NUDGE = "Your reply was empty. Answer the task, or call a tool."
_PERIODS = (1, 2, 3)
"""Cycle lengths the stall guard looks for: A A A, A B A B A B, A B C A B C A B C."""


class _Run:
    """A run's state, as its machine changes it (a plain class: one is built per run)."""

    __slots__ = ("messages", "nudged", "run_id", "seen_ids", "steps", "totals", "turns")

    def __init__(
        self,
        messages: list[Message],
        run_id: str,
        max_repeats: int | None,
        totals: Totals | None = None,
        steps: int = 0,
    ):
        self.messages = messages
        self.run_id = run_id
        self.totals = totals or Totals()
        self.steps = steps
        # Call ids already used (a task's lone user turn has none: no walk for it).
        self.seen_ids = {c.id for m in messages for c in m.tool_calls} if messages[1:] else set()
        # The stall guard's window: the last turns, enough for its longest cycle.
        window = (max_repeats or 0) * _PERIODS[-1]
        self.turns: deque[Any] = deque(maxlen=window)
        self.nudged = False


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
            many turns in a row, or a cycle of two or three turns repeats this many times
            (`None` turns the guard off).
        answer_at_limit: at the step limit, make one last call with tools disabled so the
            run ends with an answer (its `stop_reason` stays `"max_steps"`).
        max_tokens: output limit per model call (`None`: the client's default).
        approval: decides each call: "allow", "deny" or "ask". A tool whose
            `requires_approval` says so for the call's arguments (`Tool.needs_approval`)
            always asks unless the policy denies it: deny beats ask beats allow.
        on_event: receives every `Event`.
        max_calls_per_turn: calls beyond this many in one turn are not run; each gets an
            error result saying why, so the model can ask for fewer.
        max_tool_calls: tool calls allowed in the whole run; a turn that would go past it
            is not run and the run stops with `"max_tool_calls"` (`None`: no limit).
        store: a `RunStore` (`agentloops.journal`): each run is journaled as it goes, driven
            under a lease, and `resume(run_id)` continues it in any process. See
            docs/durability.md.
        lease_ttl: seconds a run's lease lasts without renewal (renewed while it runs).

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
        max_calls_per_turn: int = 64,
        max_tool_calls: int | None = None,
        store: RunStore | None = None,
        lease_ttl: float = 30.0,
    ):
        check_limits(
            max_steps=(max_steps, 1),
            max_parallel_tools=(max_parallel_tools, 1),
            max_total_tokens=(max_total_tokens, 1),
            max_repeats=(max_repeats, 2),
            max_calls_per_turn=(max_calls_per_turn, 1),
            max_tool_calls=(max_tool_calls, 1),
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
        self.max_calls_per_turn = max_calls_per_turn
        self.max_tool_calls = max_tool_calls
        self.store = store
        self._durability = session.Durability(store, lease_ttl) if store is not None else None
        self._tool_host = ToolHost(self.tools)

    # -- drivers ---------------------------------------------------------------------

    def run(
        self,
        task: str | Sequence[Message],
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """Run until an answer or a stop. `task` is a question, or a transcript ending on a
        user turn (for example an earlier result's `messages` plus a new question).
        `parent_run_id` names the run this one is part of (it goes on `RunStarted`).

        With a `store`, the run is journaled under `run_id` as it goes (`RunExists` if the
        id is taken), so `resume(run_id)` continues it in any process."""
        opener, make = self._start(task, run_id, parent_run_id, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def arun(
        self,
        task: str | Sequence[Message],
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """`run` on the event loop: async clients and tools are awaited, sync ones run in
        worker threads. Cancelling the task cancels the model call and the tool calls in
        flight; the events already emitted (and, with a store, the journal) say what ran."""
        opener, make = self._start(task, run_id, parent_run_id, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def stream(
        self, task: str | Sequence[Message], *, run_id: str | None = None
    ) -> Iterator[Event | ReActResult]:
        """Every event of the run as it happens, text and tool-call deltas included, then
        the `ReActResult`. Stopping early (closing the iterator) ends the run."""
        opener, make = self._start(task, run_id, None, True)
        return session.stream(opener, make, self._host(), self.on_event)

    def astream(
        self, task: str | Sequence[Message], *, run_id: str | None = None
    ) -> AsyncIterator[Event | ReActResult]:
        """`stream` on the event loop."""
        opener, make = self._start(task, run_id, None, True)
        return session.astream(opener, make, self._host(), self.on_event)

    def resume(
        self,
        result: ReActResult | str,
        decisions: dict[str, bool] | None = None,
        *,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """Continue a paused run: from its `ReActResult`, or by its run id with a `store`.

        `decisions` maps each pending call id to True (run it, exactly as shown) or False
        (deny it: the model gets an error result saying so). From a result, a pause resumes
        once per process, whichever loop object resumes it. By run id, the decisions are
        recorded in the store under the run's lease before anything runs, so of two
        processes approving the same pause, one runs the call and the other gets
        `RunLeased` or, once the first is done, the same result.

        Raises:
            ConfigurationError: the result is not paused, a decision names no pending call,
                a pending call has no decision, a decision is not a bool, or this pause was
                already resumed.
            RunLeased: (by run id) another process drives the run now.
        """
        opener, make = self._restart(result, decisions, parent_run_id, self.on_event is not None)
        return session.run(opener, make, self._host(), self.on_event)

    async def aresume(
        self,
        result: ReActResult | str,
        decisions: dict[str, bool] | None = None,
        *,
        parent_run_id: str | None = None,
    ) -> ReActResult:
        """`resume` on the event loop."""
        opener, make = self._restart(result, decisions, parent_run_id, self.on_event is not None)
        return await session.arun(opener, make, self._host(), self.on_event)

    def _host(self) -> ToolHost:
        host = self._tool_host  # one per loop, not per run
        if host.registry is not self.tools:  # `tools` was replaced since
            host = self._tool_host = ToolHost(self.tools)
        return host

    def status(self, run_id: str) -> ReActResult:
        """A journaled run's result as far as its journal goes (needs a `store`), calling
        nothing and taking no lease: a paused run lists its pending calls; a run that
        stopped part-way has stop reason "running"."""
        return session.status(
            self._durability, _LOOP, run_id, self._remake(run_id, False), self._host()
        )

    def _start(
        self,
        task: str | Sequence[Message],
        run_id: str | None,
        parent_run_id: str | None,
        observed: bool,
    ) -> tuple[session.Opener, session.Make[ReActResult]]:
        run_id = run_id or os.urandom(6).hex()
        machine = self.machine(task, run_id=run_id, parent_run_id=parent_run_id, observed=observed)
        if self._durability is None:  # no meta to build: the common, quick way
            return session.plain, lambda _: machine
        stored = task if isinstance(task, str) else [message_to_dict(m) for m in task]
        meta = {"task": stored, "parent_run_id": parent_run_id}
        return session.starting(self._durability, _LOOP, run_id, meta, machine)

    def _restart(
        self,
        result: ReActResult | str,
        decisions: dict[str, bool] | None,
        parent_run_id: str | None,
        observed: bool,
    ) -> tuple[session.Opener, session.Make[ReActResult]]:
        if not isinstance(result, str):
            machine = self.resume_machine(
                result, decisions or {}, parent_run_id=parent_run_id, observed=observed
            )
            return session.plain, lambda _: machine
        make = self._remake(result, observed)
        return session.resuming(self._durability, _LOOP, result, decisions, make)

    def _remake(self, run_id: str, observed: bool) -> session.Make[ReActResult]:
        """How to build the machine a journaled run's journal is replayed into."""

        def make(meta: dict[str, Any]) -> Machine[ReActResult]:
            task = meta["task"]
            task = task if isinstance(task, str) else [message_from_dict(m) for m in task]
            parent = meta.get("parent_run_id")
            return self.machine(task, run_id=run_id, parent_run_id=parent, observed=observed)

        return make

    # -- the machine -----------------------------------------------------------------

    def machine(
        self,
        task: str | Sequence[Message],
        *,
        run_id: str | None = None,
        parent_run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[ReActResult]:
        """The run as a step machine, for a driver (or a test) to perform: it yields
        effects (`agentloops.engine.effects`) and returns the `ReActResult`.

        `observed` makes it emit events; `clock` times the run for `RunFinished`.
        """
        if isinstance(task, str):
            messages = [_user_turn((Text(task),))]
        else:
            messages = list(task)
            validate_transcript(messages)
            if messages[-1].role != "user":
                raise ConfigurationError("a transcript passed to run() must end on a user turn")
        run_id = run_id or os.urandom(6).hex()
        # By position: on Python 3.11 a class call with keywords costs a third more.
        run = _Run(messages, run_id, self.max_repeats)
        return self._lifecycle(run, self._loop(run, observed), observed, clock, parent_run_id)

    def resume_machine(
        self,
        result: ReActResult,
        decisions: dict[str, bool],
        *,
        parent_run_id: str | None = None,
        observed: bool = False,
        clock: Clock = time.perf_counter,
    ) -> Machine[ReActResult]:
        """`resume` as a step machine (see `machine`). The pause is checked, and marked
        as resumed, when this is called."""
        pending = _check_resumable(result, decisions)
        run = _Run(
            messages=list(result.messages),
            run_id=result.run_id,
            max_repeats=self.max_repeats,
            totals=Totals(
                usage=result.usage, model_calls=result.model_calls, tool_calls=result.tool_calls
            ),
            steps=result.steps,
        )

        def finish_turn() -> Machine[ReActResult]:
            decided, _ = yield from self._act(run, pending, _decided(decisions))
            done = {r.call_id: r for r in (*result.held_results, *decided)}
            turn = result.messages[-1].tool_calls
            results = [done[c.id] for c in turn]
            run.messages.append(Message("user", tuple(results)))
            self._stalled(run, turn, results)  # counts from here: a pause resets it
            return (yield from self._loop(run, observed))

        return self._lifecycle(run, finish_turn(), observed, clock, parent_run_id)

    def _lifecycle(
        self,
        run: _Run,
        body: Machine[ReActResult],
        observed: bool,
        clock: Clock,
        parent_run_id: str | None,
    ) -> Machine[ReActResult]:
        def partial(exc: AgentLoopsError) -> ReActResult:
            return exc.result or self._result(run, "error", f"{type(exc).__name__}: {exc}")

        return lifecycle(
            body,
            loop=_LOOP,
            run_id=run.run_id,
            observed=observed,
            clock=clock,
            partial=partial,
            parent_run_id=parent_run_id,
        )

    def _loop(self, run: _Run, observed: bool) -> Machine[ReActResult]:
        # One request serves every step: its `messages` is the live transcript.
        request = ModelRequest(
            self.system, run.messages, tools=self.tools.specs(), max_tokens=self.max_tokens
        )
        totals, messages, run_id, model = run.totals, run.messages, run.run_id, self.model
        budget, per_turn, tools = self.max_total_tokens, self.max_calls_per_turn, self.tools
        next_tool = NextTool(_LOOP, run_id)  # the same ask every step: built once
        while True:
            if run.steps >= self.max_steps:
                return (yield from self._at_limit(run, request))
            if budget is not None and totals.total_tokens >= budget:
                why = f"max_total_tokens={budget} reached after {totals.total_tokens} tokens"
                return self._result(run, "budget", why)
            response = yield CallModel(model, request, _LOOP, run_id, totals.model_calls)
            totals.spend(response.usage)
            run.steps += 1
            message = response.message
            asked = message.tool_calls
            reason = response.stop_reason
            if not asked:
                if reason == "pause_turn":
                    messages.append(message)
                    continue  # the provider paused a long turn; sending it back continues it
                if reason in ("end_turn", "stop_sequence") and not message.text.strip():
                    if self._nudge(run, message):
                        continue
                    return self._result(run, "empty", "the model's reply was empty twice")
                messages.append(message)
                return self._result(run, answer_stop(reason), f"model stop_reason={reason}")
            message, asked = _unique_ids(run, message, asked)
            messages.append(message)
            if reason == "refusal":
                messages.append(_unanswered(asked, _REFUSED))
                return self._result(run, "refused", "model stop_reason=refusal")
            if reason in ("max_tokens", "context_window"):
                messages.append(_unanswered(asked, _CUT))
                continue
            limit = self.max_tool_calls
            if limit is not None and totals.tool_calls + min(len(asked), per_turn) > limit:
                why = f"max_tool_calls={limit} reached after {totals.tool_calls} tool calls"
                messages.append(_unanswered(asked, f"not run: {why}"))
                return self._result(run, "max_tool_calls", why)
            if len(asked) == 1 and self.approval is None and asked[0].name not in tools.asking:
                # The common case, spelled out: one call, no policy, no nesting.
                call = asked[0]
                yield StartTool(call, _LOOP, run_id)
                _, outcome = yield next_tool
                totals.tool_calls += 1
                results = [_tool_result(call.id, outcome.content, outcome.is_error)]
            else:
                calls, over = asked[:per_turn], asked[per_turn:]
                results, pending = yield from self._act(run, calls)
                if over:
                    note = f"not run: at most {per_turn} calls per turn; ask for fewer"
                    results += [ToolResult(c.id, note, True) for c in over]
                if pending:
                    decisions = yield Decide(pending, _LOOP, run_id)
                    if decisions is None:
                        return (yield from self._pause(run, pending, results, observed))
                    decided, _ = yield from self._act(run, pending, _decided(decisions))
                    done = {r.call_id: r for r in (*results, *decided)}
                    results = [done[c.id] for c in asked]
            messages.append(_user_turn(tuple(results)))
            if self.max_repeats is not None and self._stalled(run, asked, results):
                return self._result(run, "stalled", self._stall_detail())

    def _nudge(self, run: _Run, message: Message) -> bool:
        """Ask once more after an empty reply, keeping the transcript valid; False when
        the model was already nudged."""
        if run.nudged:
            return False
        run.nudged = True
        kept = tuple(b for b in message.content if type(b) is not Text)  # e.g. thinking
        if kept:
            run.messages.append(Message("assistant", kept))
            run.messages.append(Message.user(_NUDGE))
        else:  # nothing to keep: the note joins the last user turn
            last = run.messages[-1]
            run.messages[-1] = Message("user", (*last.content, Text(_NUDGE)))
        return True

    def _act(
        self,
        run: _Run,
        calls: list[ToolCall],
        decide: Callable[[ToolCall], str] | None = None,
    ) -> Machine[tuple[list[ToolResult], list[ToolCall]]]:
        """Results for the calls decided now, and the calls that wait for a human."""
        if decide is None and not self._needs_policy(calls):
            outcomes = yield from run_tools(calls, self.max_parallel_tools, _LOOP, run.run_id)
            run.totals.tool_calls += len(calls)
            return [ToolResult(c.id, *_text(outcomes[c.id])) for c in calls], []
        verdicts = {c.id: (decide or self._decide)(c) for c in calls}
        allowed = [c for c in calls if verdicts[c.id] == "allow"]
        outcomes = yield from run_tools(allowed, self.max_parallel_tools, _LOOP, run.run_id)
        run.totals.tool_calls += len(allowed)
        results = [
            ToolResult(c.id, *_text(outcomes[c.id]))
            if verdicts[c.id] == "allow"
            else ToolResult(c.id, _DENIED, True)
            for c in calls
            if verdicts[c.id] != "ask"
        ]
        return results, [c for c in calls if verdicts[c.id] == "ask"]

    def _needs_policy(self, calls: list[ToolCall]) -> bool:
        if self.approval is not None:
            return True
        get = self.tools.get
        for c in calls:  # a plain loop: a generator here costs more than the check
            t = get(c.name)
            if t is not None and t.requires_approval and t.needs_approval(c.args):
                return True
        return False

    def _decide(self, call: ToolCall) -> str:
        decision = self.approval(call) if self.approval is not None else "allow"
        if decision not in ("allow", "deny", "ask"):
            raise ConfigurationError(f"approval policy returned {decision!r} for {call.name!r}")
        t = self.tools.get(call.name)
        if decision == "allow" and t is not None and t.needs_approval(call.args):
            return "ask"
        return decision

    def _at_limit(self, run: _Run, request: ModelRequest) -> Machine[ReActResult]:
        detail = f"max_steps={self.max_steps} reached after {run.steps} steps"
        if not self.answer_at_limit:
            return self._result(run, "max_steps", detail)
        last = run.messages[-1]
        if last.role == "user":  # the note goes after the tool results, in the same turn
            run.messages[-1] = Message("user", (*last.content, Text(_FINAL)))
        else:  # the limit came right after a paused (pause_turn) assistant turn
            run.messages.append(Message.user(_FINAL))
        final = ModelRequest(
            self.system,
            run.messages,
            tools=request.tools,
            tool_choice="none",
            max_tokens=self.max_tokens,
        )
        response = yield from call_model(self.model, final, run.totals, _LOOP, run.run_id)
        run.messages.append(response.message)
        if response.message.tool_calls:  # a server that ignores tool_choice="none"
            run.messages.append(_unanswered(response.message.tool_calls, _NO_TOOLS))
        return self._result(run, "max_steps", detail)

    def _stalled(self, run: _Run, calls: list[ToolCall], results: list[ToolResult]) -> bool:
        """Whether the last turns repeat one turn, or a cycle of two or three turns,
        `max_repeats` times."""
        n = self.max_repeats
        if n is None:
            return False
        # A turn's results come first: they are what usually differs, and a string
        # compares faster than the arguments' dict.
        if len(calls) == 1:  # the common case, without building a list
            c, r = calls[0], results[0]
            turn: Any = (r.content, r.is_error, c.name, c.args)
        else:
            pairs = zip(calls, results, strict=True)
            turn = [(r.content, r.is_error, c.name, c.args) for c, r in pairs]
        turns = run.turns
        turns.append(turn)
        # Any repeat of it n times leaves this turn n times in the window: counting (in C)
        # is the quick, usual way out.
        if turns.count(turn) < n:
            return False
        return any(_cycles(turns, p, n) for p in _PERIODS)

    def _stall_detail(self) -> str:
        n = self.max_repeats
        return (
            f"max_repeats={n}: the same calls got the same results {n} turns in a row "
            "(or the same cycle of turns came back {n} times)".replace("{n}", str(n))
        )

    # -- results and events ----------------------------------------------------------

    def _pause(
        self, run: _Run, pending: list[ToolCall], held: list[ToolResult], observed: bool
    ) -> Machine[ReActResult]:
        if observed:
            yield Emit(ApprovalRequested(loop=_LOOP, run_id=run.run_id, calls=pending))
        names = ", ".join(c.name for c in pending)
        detail = f"{len(pending)} tool call(s) wait for approval: {names}"
        return self._result(run, "approval_required", detail, pending=pending, held=held)

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
        totals = run.totals
        # Built without the dataclass __init__, which sets each of the eleven fields
        # through object.__setattr__ (the record is frozen): a sixth of a short run's fixed
        # cost. The same record, every field given; tests/test_react.py checks it.
        result: ReActResult = object.__new__(ReActResult)
        result.__dict__.update(
            answer=last.text if answered else "",
            stop_reason=stop_reason,
            messages=run.messages,
            usage=totals.usage,
            model_calls=totals.model_calls,
            tool_calls=totals.tool_calls,
            steps=run.steps,
            run_id=run.run_id,
            detail=detail,
            pending_approvals=pending or [],
            held_results=held or [],
        )
        return result


def _check_resumable(result: ReActResult, decisions: dict[str, bool]) -> list[ToolCall]:
    """The pending calls of a pause that may resume now; marks the pause as resumed."""
    if result.stop_reason != "approval_required":
        raise ConfigurationError(f"only a paused run can resume, not {result.stop_reason!r}")
    pending = {c.id: c for c in result.pending_approvals}
    unknown = sorted(set(decisions) - set(pending))
    if unknown:
        raise ConfigurationError(f"no pending call with id {unknown}; pending: {sorted(pending)}")
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
    _resumed.claim(result.run_id, len(result.messages), list(pending.values()))
    return list(pending.values())


def _cycles(turns: deque[Any], p: int, n: int) -> bool:
    """Whether the last `p * n` turns are one cycle of `p` turns, `n` times over."""
    span = p * n
    return len(turns) >= span and all(turns[-i] == turns[-i - p] for i in range(1, span - p + 1))


def _text(outcome: Any) -> tuple[str, bool]:
    return outcome.content, outcome.is_error


def _decided(decisions: dict[str, bool]) -> Callable[[ToolCall], str]:
    """A policy that applies a human's decisions."""
    return lambda call: "allow" if decisions[call.id] else "deny"


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
