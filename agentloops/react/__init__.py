"""ReAct: the model decides after every observation.

`ReActLoop` holds a run's settings and its public methods; the decisions live once, in the
step machine (`react._machine`), and the runner (`agentloops.engine.runner`) drives it,
plain or durable, on this thread or the event loop. `ReActResult` is in `react.result`,
`Handoff` in `react.handoffs`. Rule: this package knows the engine and the vocabulary below
it, and no other loop (a loop given as an agent tool or a handoff is met as a tool).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any

from agentloops.compaction import Compaction, with_compaction
from agentloops.engine.decisions import Decisions, approvals
from agentloops.engine.effects import Machine
from agentloops.engine.host import ToolHost
from agentloops.engine.journaled_runs import JournaledRuns
from agentloops.engine.meter import meter_for
from agentloops.engine.runner import Opening, Runner, new_run_id
from agentloops.engine.runs import Clock
from agentloops.engine.subruns import AgentTool, agent_tool
from agentloops.engine.tree import DEFAULT_MAX_DEPTH, Limits
from agentloops.errors import check_limits
from agentloops.events import Event, EventSink
from agentloops.journal import RunStore
from agentloops.messages import Message, message_from_dict, message_to_dict
from agentloops.middleware import Chain, Middleware
from agentloops.model import ModelClient
from agentloops.output import OutputValidator, output_spec
from agentloops.react import _machine
from agentloops.react.handoffs import Handoff, handoff_tools, text_only
from agentloops.react.result import ReActResult, ReActStopReason
from agentloops.tools import ApprovalPolicy, Tool, ToolRegistry
from agentloops.usage import Amount, Price

__all__ = ["Handoff", "ReActLoop", "ReActResult", "ReActStopReason", "text_only"]


class ReActLoop(JournaledRuns[ReActResult]):
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
        max_cost: stop with `"budget"` before a model call once the run's calls cost this
            much (an amount in the price's currency; needs a price for every model that may
            answer: `price=`, a priced client, or the packaged table, else
            `ConfigurationError` here).
        price: what the models' tokens cost: one `Price`, or one per model name (see
            docs/models.md); without it, the clients' own prices. A run whose prices are
            known reports its `cost` and `cost_by_role`.
        deadline: seconds a run may take, wall clock (from its start, or from a resume):
            checked before each model call, and each call's timeout is what is left; the
            run stops with `"deadline"`. A tool call that started runs to its end.
        output_type: the type the final answer must have (a pydantic model, or any type
            pydantic validates); the run's `result.output` is the validated value. The
            model client decides how to ask for it (docs/typed-output.md).
        output_validator: `fn(output, context)`, sync or async: returns the output
            (possibly changed; `None` keeps it) or raises `ModelRetry("why")`, which goes
            back to the model with its answer.
        max_output_retries: answers that may be rejected (by validation or the validator)
            before the run stops with `"invalid_output"`.
        handoffs: loops the model may hand the conversation over to (each a `ReActLoop`
            with a `name`, or a `Handoff`): a tool `transfer_to_<name>` each. The target
            continues the conversation as a sub-run, and its answer ends the run
            (`result.answered_by`); a handoff back into its own chain stops the run with
            `"handoff_cycle"`. See docs/multi-agent.md.
        name: this loop's name, for handoffs to it and `result.answered_by`.
        max_depth: how deep sub-runs (agent tools, handoffs) may nest below a run of this
            loop; a call past it gets an error result instead of a sub-run. Its
            `max_total_tokens`, `max_tool_calls`, `max_cost` and `deadline` bound its
            sub-runs too (what they spend counts in its result).
        middleware: `Middleware` wrapping every model and tool call of a run, in order
            (the first is outermost); they go into a durable run's fingerprint. See
            docs/middleware.md.
        compaction: keep the model's view of a run within its context window: a
            `Compaction`, or its `max_context_tokens` as an int (appended to
            `middleware`). See docs/context.md.

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
        max_cost: Amount | None = None,
        price: Price | Mapping[str, Price] | None = None,
        deadline: float | None = None,
        output_type: Any = None,
        output_validator: OutputValidator | None = None,
        max_output_retries: int = 2,
        handoffs: Iterable[ReActLoop | Handoff] = (),
        name: str = "",
        max_depth: int = DEFAULT_MAX_DEPTH,
        middleware: Iterable[Middleware] = (),
        compaction: Compaction | int | None = None,
    ):
        check_limits(
            max_steps=(max_steps, 1),
            max_parallel_tools=(max_parallel_tools, 1),
            max_total_tokens=(max_total_tokens, 1),
            max_repeats=(max_repeats, 2),
            max_calls_per_turn=(max_calls_per_turn, 1),
            max_tool_calls=(max_tool_calls, 1),
            max_depth=(max_depth, 0),
        )
        self.model = model
        self.name = name
        self.max_depth = max_depth
        registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.handoffs = list(handoffs)
        if self.handoffs:  # a registry of its own: the caller's is left as it was
            registry = ToolRegistry(
                [*registry, *handoff_tools(self.handoffs, ReActLoop)],
                max_output_chars=registry.max_output_chars,
                max_abandoned_threads=registry.max_abandoned_threads,
            )
        self.tools = registry
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
        self.role = "react"
        """The role its model calls carry (`ModelRequest.role`): a Plan-and-Execute step's
        loop says "executor"."""
        self.output_type = output_type
        self.output_validator = output_validator
        self.max_output_retries = max_output_retries
        self.output_spec = output_spec(
            output_type, output_validator, max_output_retries, self.tools.names
        )
        """The output type's schema and checks (`None` without an `output_type`)."""
        self.chain = Chain(with_compaction(middleware, compaction))
        """The loop's `middleware`, checked and sorted by hook."""
        self._tool_host = ToolHost(self.tools)
        self._runner: Runner[ReActResult] = Runner(
            _machine.LOOP,
            store,
            lease_ttl,
            meter_for([model], price=price, max_cost=max_cost, deadline=deadline),
        )
        self.max_cost, self.price, self.deadline = max_cost, price, deadline

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
        return self._runner.run(
            self._fresh(task, run_id, parent_run_id), self._host(), self.on_event
        )

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
        return await self._runner.arun(
            self._fresh(task, run_id, parent_run_id), self._host(), self.on_event
        )

    def stream(
        self, task: str | Sequence[Message], *, run_id: str | None = None
    ) -> Iterator[Event | ReActResult]:
        """Every event of the run as it happens, text and tool-call deltas included, then
        the `ReActResult`. Stopping early (closing the iterator) ends the run."""
        return self._runner.stream(self._fresh(task, run_id, None), self._host(), self.on_event)

    def astream(
        self, task: str | Sequence[Message], *, run_id: str | None = None
    ) -> AsyncIterator[Event | ReActResult]:
        """`stream` on the event loop."""
        return self._runner.astream(self._fresh(task, run_id, None), self._host(), self.on_event)

    def resume(
        self,
        result: ReActResult | str,
        decisions: Decisions | None = None,
        *,
        parent_run_id: str | None = None,
        allow_changes: Collection[str] = (),
    ) -> ReActResult:
        """Continue a paused run: from its `ReActResult`, or by its run id with a `store`.

        `decisions` maps each pending call id to True or "approve" (run it, exactly as
        shown) or False or "deny" (deny it: the model gets an error result saying so); by
        run id, a call in doubt takes "rerun" (run it again with the same idempotency key)
        or "skip" (record it as not run), and an approval for it is refused (see
        `agentloops.waiting`). From a result, a pause resumes
        once per process, whichever loop object resumes it. By run id, the decisions are
        recorded in the store under the run's lease before anything runs, so of two
        processes approving the same pause, one runs the call and the other gets
        `RunLeased` or, once the first is done, the same result.

        By run id, the loop must be built as the one that started the run: its
        fingerprint (`system`, `tools`, the limits) is kept in the run's header, and a part
        that changed is a `CheckpointError` naming it, unless `allow_changes` names it
        (a deliberate upgrade: the header keeps the new settings from then on).

        Raises:
            ConfigurationError: the result is not paused, a decision names no pending call,
                a pending call has no decision, a decision is not a bool, or this pause was
                already resumed.
            RunLeased: (by run id) another process drives the run now.
            CheckpointError: (by run id) the run was started with other settings, or its
                journal is damaged.
        """
        opening = self._again(result, decisions, parent_run_id, allow_changes)
        return self._runner.run(opening, self._host(), self.on_event)

    async def aresume(
        self,
        result: ReActResult | str,
        decisions: Decisions | None = None,
        *,
        parent_run_id: str | None = None,
        allow_changes: Collection[str] = (),
    ) -> ReActResult:
        """`resume` on the event loop."""
        opening = self._again(result, decisions, parent_run_id, allow_changes)
        return await self._runner.arun(opening, self._host(), self.on_event)

    def _fresh(
        self, task: str | Sequence[Message], run_id: str | None, parent_run_id: str | None
    ) -> Opening[ReActResult]:
        def build(run_id: str, observed: bool) -> Machine[ReActResult]:
            return self.machine(task, run_id=run_id, parent_run_id=parent_run_id, observed=observed)

        def meta() -> dict[str, Any]:
            stored = task if isinstance(task, str) else [message_to_dict(m) for m in task]
            return {"task": stored, "parent_run_id": parent_run_id}

        return self._runner.fresh(build, run_id, meta, self._fingerprint)

    def _again(
        self,
        result: ReActResult | str,
        decisions: Decisions | None,
        parent_run_id: str | None,
        allow_changes: Collection[str],
    ) -> Opening[ReActResult]:
        if isinstance(result, str):
            return self._runner.journaled(
                result, decisions, self._rebuilt, self._fingerprint, allow_changes
            )
        answers = approvals(decisions or {})

        def build(observed: bool) -> Machine[ReActResult]:
            return self.resume_machine(
                result, answers, parent_run_id=parent_run_id, observed=observed
            )

        return self._runner.local(build, allow_changes)

    def _fingerprint(self) -> dict[str, object]:
        """What this loop's decisions depend on: kept with each durable run, and checked
        when it is resumed (`engine._fingerprint`)."""
        return {
            "system": self.system,
            "tools": self.tools,
            "max_steps": self.max_steps,
            "max_parallel_tools": self.max_parallel_tools,
            "max_total_tokens": self.max_total_tokens,
            "max_repeats": self.max_repeats,
            "answer_at_limit": self.answer_at_limit,
            "max_tokens": self.max_tokens,
            "max_calls_per_turn": self.max_calls_per_turn,
            "max_tool_calls": self.max_tool_calls,
            "max_cost": None if self.max_cost is None else str(self.max_cost),
            "output_type": None if self.output_spec is None else self.output_spec.schema,
            "max_output_retries": self.max_output_retries,
            "middleware": self.chain.fingerprint(),
        }

    def _rebuilt(self, meta: dict[str, Any], run_id: str, observed: bool) -> Machine[ReActResult]:
        """The machine a journaled run's journal is replayed into."""
        task = meta["task"]
        task = task if isinstance(task, str) else [message_from_dict(m) for m in task]
        parent = meta.get("parent_run_id")
        return self.machine(task, run_id=run_id, parent_run_id=parent, observed=observed)

    def _host(self) -> ToolHost:
        host = self._tool_host  # one per loop, not per run
        if host.registry is not self.tools:  # `tools` was replaced since
            host = self._tool_host = ToolHost(self.tools)
        if host.registry.hosted:  # agent tools or handoffs: each run tops a tree of runs
            return dataclasses.replace(host, limits=self._limits())
        return host

    # -- as a sub-run (an agent tool's, a handoff's) ------------------------------------

    def as_tool(
        self, name: str, description: str, *, input_type: type[Any] | None = None
    ) -> AgentTool:
        """This loop as a tool of another loop: each call is a sub-run, driven by the
        calling run's driver, whose answer is the call's result.

        Its usage and model calls count in the calling run's result (`result.subruns`
        lists each), its events stream through the caller's (`parent_run_id` names the
        caller), a pause for approval pauses the caller (whose `pending_approvals` lists
        the sub-run's calls), and with a store it is journaled as a run of its own, whose id
        is the call's idempotency key. See docs/multi-agent.md.

        Args:
            name: the tool's name (what the model calls).
            description: what the model is told it does.
            input_type: a pydantic model for the arguments (default: one `task` string);
                the sub-run's task is the value as JSON.

        Examples:
            >>> from agentloops.testing import ScriptedModel, use_tools
            >>> inner = ReActLoop(ScriptedModel(["Paris."]), [])
            >>> outer = ReActLoop(
            ...     ScriptedModel([use_tools(("geo", {"task": "Capital of France?"})), "Paris!"]),
            ...     [inner.as_tool("geo", "Answers geography questions.")],
            ... )
            >>> result = outer.run("Where is the Louvre?")
            >>> result.answer, result.model_calls, result.subruns[0].name
            ('Paris!', 3, 'geo')
        """
        return agent_tool(self, name, description, input_type=input_type)

    def _limits(self) -> Limits:
        spec = self._runner.meter
        return Limits(
            max_total_tokens=self.max_total_tokens,
            max_tool_calls=self.max_tool_calls,
            max_cost=getattr(spec, "max_cost", None),
            max_depth=self.max_depth,
            deadline=self.deadline,
            pricer=getattr(spec, "pricer", None),
            owner=id(self),
        )

    def _sub_machine(
        self,
        task: str | Sequence[Message],
        *,
        run_id: str,
        parent_run_id: str,
        observed: bool,
    ) -> Machine[ReActResult]:
        return self.machine(task, run_id=run_id, parent_run_id=parent_run_id, observed=observed)

    def _sub_resume(
        self, state: dict[str, Any], decisions: dict[str, bool], *, observed: bool
    ) -> Machine[ReActResult]:
        return self.resume_machine(ReActResult.from_state(state), decisions, observed=observed)

    def _paused_state(self, result: ReActResult) -> dict[str, Any]:
        return result.to_state()

    def _may_pause(self, seen: set[int]) -> bool:
        if id(self) in seen:
            return False
        seen.add(id(self))
        if self.approval is not None or self.tools.asking:
            return True
        return any(isinstance(t, AgentTool) and t.may_pause(seen) for t in self.tools)

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

        `observed` makes it emit events; `clock` times the run for `RunFinished`; without a
        `run_id` the run gets a new one (`engine.runner.new_run_id`).
        """
        return _machine.machine(
            self,
            task,
            run_id=run_id or new_run_id(),
            parent_run_id=parent_run_id,
            observed=observed,
            clock=clock,
        )

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
        return _machine.resume_machine(
            self, result, decisions, parent_run_id=parent_run_id, observed=observed, clock=clock
        )
