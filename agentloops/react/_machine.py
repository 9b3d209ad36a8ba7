"""The ReAct step machine: every decision a ReAct run makes, and nothing else.

One model call per step; the tool calls of a turn run concurrently and their results go
back in one user message, in the order asked. The machine stops on an answer, at a hard
step limit, on a spent token budget, when the model repeats itself, or when a tool call
needs a human (its own, or one of a sub-run's: `react._nesting`). A typed run's final
answer is judged in `react._typed`; a handoff's answer ends the run. Rule: no I/O and no
driver here (the runner and drivers do that); the settings come from the loop
(`Settings`), the state from `Run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agentloops.engine.effects import (
    CallModel,
    Decide,
    Emit,
    Machine,
    NextTool,
    StartTool,
    SubStart,
)
from agentloops.engine.runs import Clock, Totals, call_model, empty, lifecycle, nudge, run_tools
from agentloops.engine.subruns import paused
from agentloops.errors import AgentLoopsError, ConfigurationError
from agentloops.events import ApprovalRequested
from agentloops.messages import (
    Message,
    SubRun,
    Text,
    ToolCall,
    ToolOutcome,
    ToolResult,
    _tool_result,
    _user_turn,
    validate_transcript,
)
from agentloops.middleware import Chain, chained
from agentloops.model import ModelClient, ModelRequest, answer_stop
from agentloops.output import OutputSpec, OutputValidator
from agentloops.react import _nesting, _typed
from agentloops.react._resumed import check_resumable
from agentloops.react._stall import stall_detail, stalled, window
from agentloops.react.result import ReActResult, ReActStopReason
from agentloops.tools import ApprovalPolicy, ToolRegistry

LOOP = "react"
_CUT = "not run: your reply was cut off by the output limit before this call was complete"
_REFUSED = "not run: the reply that asked for this call was a refusal"
_NO_TOOLS = "not run: tools are disabled for this final answer"
_DENIED = "denied: this call was not approved, so it did not run"
_FINAL = "The step limit is reached. Answer now from what you have; no more tools."


class Settings(Protocol):
    """What the machine reads from its loop (a `ReActLoop`), at every step."""

    model: ModelClient
    tools: ToolRegistry
    name: str
    system: str
    max_steps: int
    max_parallel_tools: int
    max_total_tokens: int | None
    max_repeats: int | None
    answer_at_limit: bool
    max_tokens: int | None
    approval: ApprovalPolicy | None
    max_calls_per_turn: int
    max_tool_calls: int | None
    role: str
    output_spec: OutputSpec[Any] | None
    output_validator: OutputValidator | None
    max_output_retries: int
    chain: Chain


class Run:
    """A run's state, as its machine changes it (a plain class: one is built per run)."""

    __slots__ = (
        "messages",
        "messages",
        "name",
        "next_tool",
        "nudged",
        "rejected",
        "retried",
        "run_id",
        "seen_ids",
        "steps",
        "subruns",
        "totals",
        "turn",
        "turns",
    )

    def __init__(
        self,
        messages: list[Message],
        run_id: str,
        max_repeats: int | None,
        totals: Totals | None = None,
        steps: int = 0,
        name: str = "",
        subruns: list[SubRun] | None = None,
    ):
        self.messages = messages
        self.run_id = run_id
        self.totals = totals or Totals()
        self.steps = steps
        self.name = name
        """Who answers: the loop's name, or a handoff target's."""
        self.subruns: list[SubRun] = subruns if subruns is not None else []
        # Call ids already used (a task's lone user turn has none: no walk for it).
        self.seen_ids = {c.id for m in messages for c in m.tool_calls} if messages[1:] else set()
        self.turns = window(max_repeats)  # the stall guard's last turns
        self.nudged = False
        self.next_tool = NextTool(LOOP, run_id)  # the same ask every step: built once
        # A parallel turn's outcomes as they come back (None between turns): a run that
        # fails part-way through the turn holds them in its partial result.
        self.turn: dict[str, ToolOutcome] | None = None
        self.rejected = 0
        """A typed run's final answers rejected so far (`max_output_retries`)."""
        self.retried: dict[str, int] = {}
        """Per tool, how many calls in a row asked for a retry (`ModelRetry`)."""


def machine(
    loop: Settings,
    task: str | Sequence[Message],
    *,
    run_id: str,
    parent_run_id: str | None,
    observed: bool,
    clock: Clock = time.perf_counter,
) -> Machine[ReActResult]:
    """A new run as a step machine (see `ReActLoop.machine`); its id comes from outside."""
    if isinstance(task, str):
        messages = [_user_turn((Text(task),))]
    else:
        messages = list(task)
        validate_transcript(messages)
        if messages[-1].role != "user":
            raise ConfigurationError("a transcript passed to run() must end on a user turn")
    spec = loop.output_spec
    if spec is not None and spec.tool in loop.tools:
        raise ConfigurationError(
            f"a tool is named {spec.tool!r}, the name of output_type's final-answer tool; "
            "rename it, or build the loop with its tools"
        )
    # By position: on Python 3.11 a class call with keywords costs a third more.
    run = Run(messages, run_id, loop.max_repeats, None, 0, loop.name)
    body = _lifecycle(run, steps(loop, run, observed), observed, clock, parent_run_id)
    return _chained(loop, run, body, task, parent_run_id, observed)


def resume_machine(
    loop: Settings,
    result: ReActResult,
    decisions: dict[str, bool],
    *,
    parent_run_id: str | None,
    observed: bool,
    clock: Clock = time.perf_counter,
) -> Machine[ReActResult]:
    """A paused run, resumed with `decisions`, as a step machine (see
    `ReActLoop.resume_machine`). The pause is checked, and marked as resumed, now."""
    own = check_resumable(result, decisions)
    turn = result.messages[-1].tool_calls
    ids = {c.id for c in turn}
    waiting = [s for s in result.subruns if paused(s) and s.call_id in ids]
    starts = _nesting.resumed(waiting, result.pending_paths, decisions)
    totals = Totals(
        usage=result.usage, model_calls=result.model_calls, tool_calls=result.tool_calls
    )
    for s in waiting:  # each reports all it spent when it ends: its share so far goes
        totals.absorb(s, -1)
    run = Run(
        messages=list(result.messages),
        run_id=result.run_id,
        max_repeats=loop.max_repeats,
        totals=totals,
        steps=result.steps,
        name=loop.name,
        subruns=[s for s in result.subruns if s not in waiting],
    )

    def finish_turn() -> Machine[ReActResult]:
        decided, _, still = yield from _act(loop, run, own, _decided(decisions))
        calls = [c for c in turn if c.id in starts]
        outcomes = yield from run_tools(calls, loop.max_parallel_tools, LOOP, run.run_id, starts)
        again, still_more = _nesting.collected(
            run.subruns, run.totals, calls, outcomes, lambda c, o: _answer(loop, run, c, o)
        )
        still += still_more
        handoff = _nesting.handoff_in(loop.tools, calls)
        if handoff is not None and not still:  # a handoff's target ended: so does the run
            held, _ = _nesting.handover_turn(loop.tools, run.messages, turn, handoff)
            return _handed_over(run, held, outcomes[handoff.id])
        done = {r.call_id: r for r in (*result.held_results, *decided, *again)}
        if still:
            held = [done[c.id] for c in turn if c.id in done]
            return (yield from _pause(run, [], held, still, observed))
        results = [done[c.id] for c in turn]
        run.messages.append(Message("user", tuple(results)))
        stalled(run.turns, loop.max_repeats, turn, results)  # counts from here: a pause resets it
        return (yield from steps(loop, run, observed))

    body = _lifecycle(run, finish_turn(), observed, clock, parent_run_id)
    return _chained(loop, run, body, result.messages, parent_run_id, observed)


def _chained(
    loop: Settings,
    run: Run,
    body: Machine[ReActResult],
    task: str | Sequence[Message],
    parent_run_id: str | None,
    observed: bool,
) -> Machine[ReActResult]:
    """The run inside the loop's middleware (itself, without any)."""
    if not loop.chain:
        return body
    return chained(
        body,
        loop.chain,
        loop=LOOP,
        run_id=run.run_id,
        task=task,
        totals=run.totals,
        parent_run_id=parent_run_id,
        observed=observed,
    )


def _lifecycle(
    run: Run,
    body: Machine[ReActResult],
    observed: bool,
    clock: Clock,
    parent_run_id: str | None,
) -> Machine[ReActResult]:
    def partial(exc: AgentLoopsError) -> ReActResult:
        if exc.result is not None:
            return exc.result  # type: ignore[no-any-return]
        came, run.turn = run.turn or {}, None  # a turn cut short: what came back is held
        run.totals.tool_calls += len(came)
        for o in came.values():  # a sub-run that came back: what it spent is the run's
            if o.run is not None:
                run.totals.absorb(o.run)
                run.subruns.append(o.run)
        held = [_tool_result(i, o.content, o.is_error) for i, o in came.items()]
        return _result(run, "error", f"{type(exc).__name__}: {exc}", held=held)

    return lifecycle(
        body,
        loop=LOOP,
        run_id=run.run_id,
        observed=observed,
        clock=clock,
        partial=partial,
        parent_run_id=parent_run_id,
    )


def steps(loop: Settings, run: Run, observed: bool) -> Machine[ReActResult]:
    """Model turns until the run answers or stops."""
    spec = loop.output_spec
    # One request serves every step: its `messages` is the live transcript.
    role = loop.role
    request = ModelRequest(
        loop.system,
        run.messages,
        tools=loop.tools.specs(),
        max_tokens=loop.max_tokens,
        output=spec.schema if spec is not None else None,
        role=role,
    )
    target = spec.target if spec is not None else None
    totals, messages, run_id, model = run.totals, run.messages, run.run_id, loop.model
    budget, per_turn, tools = loop.max_total_tokens, loop.max_calls_per_turn, loop.tools
    dynamic = tools.dynamic  # a toolset's tools may change between model calls
    seen = tools.revision
    while True:
        if dynamic and tools.revision != seen:
            seen = tools.revision
            request = ModelRequest(
                loop.system,
                messages,
                tools=tools.specs(),
                max_tokens=loop.max_tokens,
                output=request.output,  # a typed run's schema stays on every request
                role=role,
            )
        if run.steps >= loop.max_steps:
            return (yield from _at_limit(loop, run, request))
        if budget is not None and totals.total_tokens >= budget:
            why = f"max_total_tokens={budget} reached after {totals.total_tokens} tokens"
            return _result(run, "budget", why)
        # call_model's two lines, spelled out: a generator per step costs about 3% of it
        response = yield CallModel(model, request, LOOP, run_id, totals.model_calls, output=target)
        totals.spend(response.usage)
        run.steps += 1
        message = response.message
        asked = message.tool_calls
        reason = response.stop_reason
        held: list[ToolResult] | None = None  # a rejected typed answer's results
        if spec is not None and _typed.is_answer(spec, response):
            message, asked = _unique_ids(run, message, asked)
            judged = yield from _typed.judge(loop, spec, run, message, response, observed)
            if isinstance(judged, tuple):
                stop, value = judged
                if stop == "invalid_output":
                    return _result(run, stop, value, answer="")
                why = f"model stop_reason={reason}"
                return _result(run, "answered", why, answer=spec.text(value), output=value)
            if judged is None:
                continue  # rejected, and sent back
            held, asked = judged, [c for c in asked if c.name != spec.tool]
        elif not asked:
            if reason == "pause_turn":
                messages.append(message)
                continue  # the provider paused a long turn; sending it back continues it
            if empty(response):
                if not run.nudged:  # once: a second empty reply ends the run
                    run.nudged = True
                    nudge(messages, message, tools=bool(request.tools))
                    continue
                return _result(run, "empty", "the model's reply was empty twice")
            messages.append(message)
            return _result(run, answer_stop(reason), f"model stop_reason={reason}")
        else:
            message, asked = _unique_ids(run, message, asked)
            messages.append(message)
            if reason == "refusal":
                messages.append(_unanswered(asked, _REFUSED))
                return _result(run, "refused", "model stop_reason=refusal")
            if reason in ("max_tokens", "context_window"):
                messages.append(_unanswered(asked, _CUT))
                continue
        limit = loop.max_tool_calls
        if limit is not None and totals.tool_calls + min(len(asked), per_turn) > limit:
            why = f"max_tool_calls={limit} reached after {totals.tool_calls} tool calls"
            messages.append(_unanswered(message.tool_calls, f"not run: {why}"))
            return _result(run, "max_tool_calls", why)
        if (
            len(asked) == 1
            and held is None
            and loop.approval is None
            and asked[0].name not in tools.asking
            and asked[0].name not in tools.hosted
        ):
            # The common turn: one call that no policy or tool rule vets, and no sub-run,
            # run without `_act`'s verdicts, slicing and decisions (the same calls, the
            # same results).
            results = yield from _run_calls(loop, run, asked)
        else:
            calls, over = asked[:per_turn], asked[per_turn:]
            handoff = _nesting.handoff_in(tools, calls) if tools.hosted else None
            if handoff is not None:
                ended = yield from _hand_over(loop, run, asked, handoff, observed)
                if ended is not None:
                    return ended
                continue
            results, pending, waiting = yield from _act(loop, run, calls)
            if over:
                note = f"not run: at most {per_turn} calls per turn; ask for fewer"
                results += [ToolResult(c.id, note, True) for c in over]
            if held is not None:
                results += held
            if pending:
                decisions = yield Decide(pending, LOOP, run_id)
                if decisions is None:
                    return (yield from _pause(run, pending, results, waiting, observed))
                decided, _, still = yield from _act(loop, run, pending, _decided(decisions))
                waiting += still
                results += decided
            if pending or held is not None or waiting:
                done = {r.call_id: r for r in results}
                asked = message.tool_calls
                results = [done[c.id] for c in asked if c.id in done]
            if waiting:  # a sub-run waits for a person: so does this run
                return (yield from _pause(run, [], results, waiting, observed))
        messages.append(_user_turn(tuple(results)))
        if loop.max_repeats is not None and stalled(run.turns, loop.max_repeats, asked, results):
            return _result(run, "stalled", stall_detail(loop.max_repeats))


def _act(
    loop: Settings,
    run: Run,
    calls: list[ToolCall],
    decide: Callable[[ToolCall], str] | None = None,
) -> Machine[tuple[list[ToolResult], list[ToolCall], list[SubRun]]]:
    """Results for the calls decided now, the calls that wait for a human, and the
    sub-runs (of agent tools) that wait for one."""
    if decide is None and not _needs_policy(loop, calls):
        if not loop.tools.hosted:
            return (yield from _run_calls(loop, run, calls)), [], []
        results, waiting = yield from _run_hosting(loop, run, calls)
        return results, [], waiting
    verdicts = {c.id: (decide or _policy(loop))(c) for c in calls}
    allowed = [c for c in calls if verdicts[c.id] == "allow"]
    if loop.tools.hosted:
        ran, waiting = yield from _run_hosting(loop, run, allowed)
    else:
        ran, waiting = (yield from _run_calls(loop, run, allowed)), []
    done = {r.call_id: r for r in ran}
    results = [
        done[c.id] if verdicts[c.id] == "allow" else ToolResult(c.id, _DENIED, True)
        for c in calls
        if verdicts[c.id] != "ask" and (verdicts[c.id] != "allow" or c.id in done)
    ]
    return results, [c for c in calls if verdicts[c.id] == "ask"], waiting


def _run_calls(loop: Settings, run: Run, calls: list[ToolCall]) -> Machine[list[ToolResult]]:
    """Run calls that may run, counting them; their results in the order asked. Every
    turn's calls run here, whichever way the turn came."""
    if len(calls) == 1:  # the common turn, without run_tools' bookkeeping
        call = calls[0]
        yield StartTool(call, LOOP, run.run_id)
        _, outcome = yield run.next_tool
        run.totals.tool_calls += 1
        return [_answer(loop, run, call, outcome)]
    outcomes = yield from _turn(loop, run, calls)
    return [_answer(loop, run, c, outcomes[c.id]) for c in calls]


def _turn(loop: Settings, run: Run, calls: list[ToolCall]) -> Machine[dict[str, ToolOutcome]]:
    """Run a turn's calls, counting them; their outcomes are held in `run.turn` as they
    come back, so a run failing part-way (a failed sink) keeps them."""
    outcomes: dict[str, ToolOutcome] = {}
    run.turn = outcomes
    yield from run_tools(calls, loop.max_parallel_tools, LOOP, run.run_id, outcomes=outcomes)
    run.turn = None
    run.totals.tool_calls += len(calls)
    return outcomes


def _run_hosting(
    loop: Settings, run: Run, calls: list[ToolCall]
) -> Machine[tuple[list[ToolResult], list[SubRun]]]:
    """`_run_calls` for a loop with agent tools: each sub-run's spending rolls up into the
    run's, and a paused one's call gets no result yet (it is returned, waiting)."""
    outcomes = yield from _turn(loop, run, calls)
    return _nesting.collected(
        run.subruns, run.totals, calls, outcomes, lambda c, o: _answer(loop, run, c, o)
    )


def _needs_policy(loop: Settings, calls: list[ToolCall]) -> bool:
    if loop.approval is not None:
        return True
    get = loop.tools.get
    for c in calls:  # a plain loop: a generator here costs more than the check
        t = get(c.name)
        if t is not None and t.requires_approval and t.needs_approval(c.args):
            return True
    return False


def _policy(loop: Settings) -> Callable[[ToolCall], str]:
    """The loop's approval policy, with each tool's own rule on top: deny beats ask beats
    allow."""

    def decide(call: ToolCall) -> str:
        decision = loop.approval(call) if loop.approval is not None else "allow"
        if decision not in ("allow", "deny", "ask"):
            raise ConfigurationError(f"approval policy returned {decision!r} for {call.name!r}")
        t = loop.tools.get(call.name)
        if decision == "allow" and t is not None and t.needs_approval(call.args):
            return "ask"
        return decision

    return decide


def _at_limit(loop: Settings, run: Run, request: ModelRequest) -> Machine[ReActResult]:
    detail = f"max_steps={loop.max_steps} reached after {run.steps} steps"
    if not loop.answer_at_limit:
        return _result(run, "max_steps", detail)
    spec = loop.output_spec
    last = run.messages[-1]
    if last.role == "user":  # the note goes after the tool results, in the same turn
        run.messages[-1] = Message("user", (*last.content, Text(_FINAL)))
    else:  # the limit came right after a paused (pause_turn) assistant turn
        run.messages.append(Message.user(_FINAL))
    final = ModelRequest(
        loop.system,
        run.messages,
        tools=request.tools,
        tool_choice="none",
        max_tokens=loop.max_tokens,
        output=request.output,
        role=request.role,
    )
    target = spec.target if spec is not None else None
    response = yield from call_model(loop.model, final, run.totals, LOOP, run.run_id, output=target)
    if spec is not None and _typed.is_answer(spec, response):
        output = yield from _typed.last(loop, spec, run, response)
        answer = spec.text(output) if output is not None else ""
        return _result(run, "max_steps", detail, answer=answer, output=output)
    run.messages.append(response.message)
    if response.message.tool_calls:  # a server that ignores tool_choice="none"
        run.messages.append(_unanswered(response.message.tool_calls, _NO_TOOLS))
    return _result(run, "max_steps", detail)


def _pause(
    run: Run,
    own: list[ToolCall],
    held: list[ToolResult],
    waiting: list[SubRun],
    observed: bool,
) -> Machine[ReActResult]:
    """Pause the turn: its own calls that ask, and those its paused sub-runs wait for."""
    pending, paths = _nesting.pending_of(run.run_id, own, waiting)
    if observed:
        yield Emit(ApprovalRequested(loop=LOOP, run_id=run.run_id, calls=pending))
    names = ", ".join(c.name for c in pending)
    detail = f"{len(pending)} tool call(s) wait for approval: {names}"
    if waiting:
        detail += f" (in {', '.join(s.name for s in waiting)})"
    return _result(run, "approval_required", detail, pending=pending, held=held, paths=paths)


def _hand_over(
    loop: Settings, run: Run, asked: list[ToolCall], call: ToolCall, observed: bool
) -> Machine[ReActResult | None]:
    """A turn with a handoff: the target continues the conversation as a sub-run, and its
    answer ends this run (`None`: it could not start, the model is told why and goes on)."""
    results, task = _nesting.handover_turn(loop.tools, run.messages, asked, call)
    starts = {call.id: SubStart(task=task)}
    outcomes = yield from run_tools([call], 1, LOOP, run.run_id, starts)
    run.totals.tool_calls += 1
    outcome = outcomes[call.id]
    if outcome.run is None:  # refused before it started (too deep, say)
        failed = ToolResult(call.id, outcome.content, True)
        run.messages.append(
            Message("user", tuple(failed if r.call_id == call.id else r for r in results))
        )
        return None
    run.totals.absorb(outcome.run)
    run.subruns.append(outcome.run)
    if paused(outcome.run):
        held = [r for r in results if r.call_id != call.id]
        return (yield from _pause(run, [], held, [outcome.run], observed))
    return _handed_over(run, results, outcome)


def _handed_over(run: Run, results: list[ToolResult], outcome: ToolOutcome) -> ReActResult:
    """The run's end, as its handoff's target ended: its answer (as this run's last turn),
    its stop reason, and who answered."""
    sub = outcome.run
    assert sub is not None
    run.messages.append(Message("user", tuple(results)))
    answered = sub.stop_reason == "answered"
    if answered and outcome.content.strip():
        run.messages.append(Message.assistant(outcome.content))
    run.name = sub.answered_by or ("" if sub.stop_reason == "handoff_cycle" else sub.name)
    detail = sub.detail or f"answered by {run.name}"
    stop: Any = sub.stop_reason
    return _result(run, stop, detail)


def _result(
    run: Run,
    stop_reason: ReActStopReason,
    detail: str,
    pending: list[ToolCall] | None = None,
    held: list[ToolResult] | None = None,
    paths: dict[str, tuple[str, ...]] | None = None,
    *,
    answer: str | None = None,
    output: Any = None,
) -> ReActResult:
    if answer is None:
        last = run.messages[-1]
        # A paused turn's text is a preamble to its pending calls, not an answer.
        answered = last.role == "assistant" and stop_reason != "approval_required"
        answer = last.text if answered else ""
    totals = run.totals
    # Built without the dataclass __init__, which sets each of the twelve fields through
    # object.__setattr__ (the record is frozen): a sixth of a short run's fixed cost. The
    # same record, every field given; tests/react/test_react.py checks it.
    result: ReActResult = object.__new__(ReActResult)
    result.__dict__.update(
        answer=answer,
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
        cost=None,
        cost_by_role={},
        output=output,
        pending_paths=paths or {},
        subruns=run.subruns,
        answered_by=run.name,
    )
    return result


def _answer(loop: Settings, run: Run, call: ToolCall, outcome: ToolOutcome) -> ToolResult:
    """The result the model sees for a call that ran. A tool that asked for a retry
    (`ModelRetry`) more times in a row than its `retries` gets a result saying so."""
    retried = run.retried
    if not outcome.retry:
        if retried:
            retried.pop(call.name, None)  # the run of retries is broken
        return _tool_result(call.id, outcome.content, outcome.is_error)
    n = retried[call.name] = retried.get(call.name, 0) + 1
    t = loop.tools.get(call.name)
    allowed = t.retries if t is not None else 0
    if n <= allowed:
        return ToolResult(call.id, outcome.content, True)
    spent = (
        f"{outcome.content}\n[{call.name!r} asked for a retry {n} times in a row and its "
        f"retries are spent (retries={allowed}): do not call it this way again; change course]"
    )
    return ToolResult(call.id, spent, True)


def _decided(decisions: dict[str, bool]) -> Callable[[ToolCall], str]:
    """A policy that applies a human's decisions."""
    return lambda call: "allow" if decisions[call.id] else "deny"


def _unanswered(calls: list[ToolCall], why: str) -> Message:
    return Message("user", tuple(ToolResult(c.id, why, True) for c in calls))


def _unique_ids(
    run: Run, message: Message, calls: list[ToolCall]
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
