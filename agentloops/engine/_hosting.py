"""Hosting one call of an agent tool (or a handoff): its sub-run opened, handed to the
calling run's driver to drive as a nested machine, and turned into the call's outcome.

The sub-run's id is the call's idempotency key (`PARENT_RUN_ID:CALL_ID`), so a resumed
parent finds it. With a store (the calling run's), it is journaled as a run of its own,
linked to its parent in its header (`parent_run_id`, `call_id`, `tool`), under a lease its
parent's holder takes: a new call begins it, a call met again (the parent resumed, or a
pause answered) reopens it and its journal is replayed. Its machine is stamped as nested
(its events name the parent), metered (its own `max_cost`, and the nearest deadline of the
tree), counted in the tree, and journaled, in that order outwards.

Rule: opening and closing runs, no driving: the drivers (`sync`, `aio`) drive.
"""

from __future__ import annotations

import time
from typing import Any

import pydantic

from agentloops._validation import field_errors
from agentloops.engine import session as sessions
from agentloops.engine.effects import Machine, StartTool
from agentloops.engine.host import ToolHost
from agentloops.engine.meter import Meter, metered
from agentloops.engine.runs import nested
from agentloops.engine.subruns import AgentTool, outcome, transcript_task
from agentloops.engine.tree import Limits, Node, tracked
from agentloops.errors import (
    AgentLoopsError,
    CallInDoubt,
    ModelOutputError,
    PlanValidationError,
    RunError,
    RunExists,
    RunNotFound,
)
from agentloops.messages import SubRun, ToolOutcome
from agentloops.tools._text import capped


class Job:
    """One hosted call: `refusal()`, or `open()` then (after the drive) `outcome(result)`
    or `failed(error)`, and always `close()`."""

    def __init__(self, effect: StartTool, host: ToolHost, observed: bool):
        self.effect = effect
        self.host = host
        self.observed = observed
        tool = host.registry.get(effect.call.name)
        assert isinstance(tool, AgentTool), f"not an agent tool: {tool!r}"
        self.tool = tool
        self.limits = tool.loop._limits()
        self.node = host.node if host.node is not None else Node(Limits())
        self.run_id = _journal_key(effect, host.session)
        self.child: Node | None = None
        self.session: sessions.Session | None = None
        self.alone = None if host.session is not None else tool.loop._runner.durability
        """The sub-run's loop's own store, where it is journaled when the calling run has
        none (a `PlanAndExecute` always has one)."""
        self.started = time.perf_counter()

    def refusal(self) -> ToolOutcome | None:
        """The call's outcome when no sub-run may start: arguments that fail the tool's
        schema, a tree already as deep as it may go, a handoff back into its own chain."""
        effect, tool = self.effect, self.tool
        start = effect.start
        if start is None or start.state is None:  # a resumed sub-run was checked when made
            try:
                self.args = tool.validate(effect.call.args)
            except pydantic.ValidationError as exc:
                why = "; ".join(field_errors(exc))
                return self._error(f"invalid arguments for {tool.name!r}: {why}")
        too_deep = self.node.too_deep()
        if too_deep is not None:
            return self._error(f"not run: {too_deep}")
        if tool.handoff and self.limits.owner in self.node.chain:
            chain = f"{self.node.names()} > {tool.name}"
            run = SubRun(
                name=tool.name,
                call_id=effect.call.id,
                run_id=self.run_id,
                loop=tool.kind,
                stop_reason="handoff_cycle",
                detail=f"a cycle of handoffs: {chain} hands the conversation back to a loop "
                "already in the chain",
            )
            return ToolOutcome(content=f"not run: {run.detail}", is_error=True, run=run)
        return None

    def open(self) -> tuple[Machine[Any], ToolHost]:
        """The sub-run's machine and where its tool calls run (may read and write the store)."""
        effect, tool, loop = self.effect, self.tool, self.tool.loop
        start, parent = effect.start, self.host.session
        machine: Machine[Any] | None = None
        if parent is not None:
            self.session, machine = self._journaled(parent)
        elif self.alone is not None:
            self.session, machine = self._journaled_alone(self.alone)
        observed = self._building(self.session is not None)
        if machine is None:
            if start is not None and start.state is not None:
                machine = loop._sub_resume(start.state, start.decisions or {}, observed=observed)
            else:
                machine = loop._sub_machine(
                    self._task(),
                    run_id=self.run_id,
                    parent_run_id=effect.run_id,
                    observed=observed,
                )
        machine = nested(machine, effect.run_id, effect.call.id)
        meter = self._meter()
        if meter is not None:
            machine = metered(machine, meter)
        self.child = child = self.node.child(
            self.limits, self.run_id, tool.name, handoff=tool.handoff
        )
        machine = tracked(machine, child)
        own = loop._host()
        host = ToolHost(own.registry, own.executor, node=child, session=self.session)
        if self.session is not None:
            self.session.__enter__()  # the lease keeper starts
            machine = self.session.journaled(machine, host, self.observed)
        return machine, host

    def _building(self, journaled: bool) -> bool:
        """Whether the sub-run's machine emits events: when observed, and when journaled by
        a loop whose milestones (plans, steps) its journal keeps (`Runner.milestones`),
        observed or not."""
        return self.observed or (journaled and bool(self.tool.loop._runner.milestones))

    def _journaled(self, parent: sessions.Session) -> tuple[sessions.Session, Machine[Any] | None]:
        """The sub-run's session: begun for a new call, reopened for one met before (then
        with its machine rebuilt from the header, for its journal to be replayed into)."""
        tool = self.tool
        d = sessions.Durability(parent.store, parent.lease_ttl)
        meta = {**self._meta(), "parent_nonce": parent.meta.get("nonce", "")}
        key, parts = self.run_id, tool.loop._fingerprint()

        def begin() -> sessions.Session:
            return sessions.begin(
                d, kind=tool.kind, run_id=key, meta=meta, fingerprint=parts, parent=parent
            )

        met = parent.started(key)
        if not met:  # a new call: begin its run (met before only if a drive stopped early)
            try:
                return begin(), None
            except RunExists:
                if d.store.run_info(key).meta.get("parent_nonce") != meta["parent_nonce"]:
                    # Left by an earlier run under the parent's id, deleted since: that
                    # run cannot be resumed any more, and neither can this sub-run of it.
                    d.store.delete(key, force=True)
                    return begin(), None
        try:
            held = sessions.reopen(
                d, kind=tool.kind, run_id=key, decisions=None, fingerprint=parts, parent=parent
            )
        except RunNotFound:  # the parent stopped after starting the call, before its run began
            return begin(), None
        try:
            machine = tool.loop._rebuilt(held.meta, self.run_id, self._building(True))
        except BaseException:
            held.store.release(held.keeper.lease)
            raise
        return held, machine

    def _journaled_alone(
        self, d: sessions.Durability
    ) -> tuple[sessions.Session, Machine[Any] | None]:
        """The session of a sub-run journaled in its loop's own store (the calling run has
        no store): begun for a new call, reopened (with its decisions) for a paused one."""
        tool, start = self.tool, self.effect.start
        parts = tool.loop._fingerprint()
        if start is None or start.state is None:
            meta = self._meta()
            return sessions.begin(
                d, kind=tool.kind, run_id=self.run_id, meta=meta, fingerprint=parts
            ), None
        held = sessions.reopen(
            d,
            kind=tool.kind,
            run_id=self.run_id,
            decisions=start.decisions,
            fingerprint=parts,
            alone=True,
        )
        try:
            machine = tool.loop._rebuilt(held.meta, self.run_id, self._building(True))
        except BaseException:  # pragma: no cover  (a header this call wrote itself)
            held.store.release(held.keeper.lease)
            raise
        return held, machine

    def _meta(self) -> dict[str, Any]:
        effect = self.effect
        return {
            "task": transcript_task(self._task()),
            "parent_run_id": effect.run_id,
            "call_id": effect.call.id,
            "tool": self.tool.name,
        }

    def _task(self) -> Any:
        start = self.effect.start
        if start is not None and start.task is not None:
            return start.task  # a handoff's conversation
        return self.tool.task(self.args)

    def _meter(self) -> Meter | None:
        """The sub-run's meter: its loop's own (`max_cost`, prices, deadline), with the
        nearest deadline of the tree above it."""
        spec = self.tool.loop._runner.meter
        left = self.node.left()
        if spec is None and left is None:
            return None
        if spec is None:
            assert left is not None
            return Meter(pricer=None, deadline=max(left, 1e-6))
        meter: Meter = spec()
        if left is not None:
            own = meter.left()
            if own is None or left < own:
                meter.ends, meter.deadline = meter.clock() + left, left
        return meter

    def outcome(self, result: Any) -> ToolOutcome:
        assert self.child is not None
        seconds = time.perf_counter() - self.started
        limit = self.host.registry.max_output_chars
        journal = None if self.alone is None else self.run_id
        return outcome(self.tool, self.effect, result, self.child, seconds, limit, journal)

    def failed(self, exc: AgentLoopsError) -> ToolOutcome:
        """A sub-run that raised: the sub-agent could not do the task (an invalid plan, a
        failed step, output that never validated) is the call's error outcome; any other
        failure (the model's, the store's, a call in doubt) is the calling run's, raised
        again for it to attach its own partial result (the sub-run's is in its journal)."""
        partial = exc.result
        if (
            isinstance(exc, PlanValidationError | ModelOutputError | RunError)
            and not isinstance(exc, CallInDoubt)
            and partial is not None
        ):
            result = self.outcome(partial)
            text = f"{self.tool.name} failed: {type(exc).__name__}: {exc}"
            limit = self.host.registry.max_output_chars
            return ToolOutcome(
                content=capped(text, limit), is_error=True, seconds=result.seconds, run=result.run
            )
        if self.child is not None:
            self.child.detach()
        exc.result = None  # the calling run attaches its own
        raise exc

    def close(self) -> None:
        """Release the sub-run's lease (its journal says how it ended)."""
        held, self.session = self.session, None
        if held is not None:
            held.__exit__(None, None, None)

    def _error(self, text: str) -> ToolOutcome:
        limit = self.host.registry.max_output_chars
        return ToolOutcome(
            content=capped(text, limit), is_error=True, seconds=time.perf_counter() - self.started
        )


def _journal_key(effect: StartTool, parent: sessions.Session | None) -> str:
    """The call's key in its run's journal, which is its sub-run's id: its idempotency key
    without the run's nonce (`RUN_ID:CALL_ID`; the sub-run has a nonce of its own)."""
    key = effect.call_key
    nonce = parent.meta.get("nonce") if parent is not None else None
    suffix = f"@{nonce}"
    return key[: -len(suffix)] if nonce and key.endswith(suffix) else key
