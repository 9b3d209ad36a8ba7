"""The Plan-and-Execute step machine: plan, run each step as a ReAct machine, review,
report.

It saves nothing and reads no store: a durable run's outcomes are journaled around it
(`agentloops.engine.durable`), and a resumed run is its journal replayed into it.

Rule: no I/O and no driver here; the settings come from the loop (`Settings`), the run's
state is `result.RunState`, and each step's decisions are ReAct's own machine.
"""

from __future__ import annotations

import time
from typing import Any, Protocol, TypeVar

import pydantic

from agentloops.answer import answer_machine
from agentloops.engine.effects import Emit, Machine
from agentloops.engine.runs import Clock, lifecycle, nested
from agentloops.errors import AgentLoopsError, PlanValidationError
from agentloops.events import Event, PlanMade, Replanned, StepFinished, StepStarted
from agentloops.middleware import Chain, chained
from agentloops.model import ModelClient
from agentloops.output import OutputSpec, OutputValidator
from agentloops.plan_execute.prompts import (
    planning_prompt,
    replanning_prompt,
    report_prompt,
    step_prompt,
)
from agentloops.plan_execute.result import PlanExecuteResult, PlanStopReason, RunState, StepRecord
from agentloops.plan_execute.schema import Plan, PlanRevision, plan_problems
from agentloops.react import ReActLoop, ReActResult
from agentloops.structured import Answering, reply_stop, structured_machine, text_machine
from agentloops.tools import ToolRegistry
from agentloops.usage import Usage

LOOP = "plan_execute"
T = TypeVar("T", bound=pydantic.BaseModel)


class Settings(Protocol):
    """What the machine reads from its loop (a `PlanAndExecute`)."""

    planner: ModelClient
    reporter: ModelClient
    step_loop: ReActLoop
    tools: ToolRegistry
    max_plan_steps: int
    replan: bool
    max_replans: int
    max_retries: int
    max_digest_chars: int
    max_tokens: int | None
    planner_system: str
    reporter_system: str
    replanner_system: str
    output_spec: OutputSpec[Any] | None
    output_validator: OutputValidator | None
    max_output_retries: int
    chain: Chain


def machine(
    p: Settings,
    task: str,
    *,
    run_id: str,
    observed: bool,
    clock: Clock = time.perf_counter,
    parent_run_id: str | None = None,
) -> Machine[PlanExecuteResult]:
    """A run (see `PlanAndExecute.machine`): a new one, or one whose journal is replayed
    into it; a sub-run of `parent_run_id`'s (an agent tool's call). It reads no store; its
    id comes from outside."""
    run = _Run(p, RunState(run_id=run_id, task=task), observed, clock, parent_run_id)
    # One chain for the whole run, the steps' calls included (they pass through it).
    return chained(
        run.lifecycle(run.steps()),
        p.chain,
        loop=LOOP,
        run_id=run_id,
        task=task,
        totals=run.state.totals,
        parent_run_id=parent_run_id,
        observed=observed,
    )


class _Run:
    """One run's machine: its settings, its state, and how it is watched."""

    def __init__(
        self,
        p: Settings,
        state: RunState,
        observed: bool,
        clock: Clock,
        parent_run_id: str | None = None,
    ):
        self.p = p
        self.state = state
        self.observed = observed
        self.clock = clock
        self.parent_run_id = parent_run_id

    def steps(self) -> Machine[PlanExecuteResult]:
        """Plan, run the steps in order (reviewing the rest when asked), then report. A
        paused step ends the run until it resumes (replayed up to the pause, then on)."""
        state, clock = self.state, self.clock
        yield from self._make_plan()
        while (i := state.next_step()) is not None:
            step_started = clock()
            if self._review_due(i):
                yield from self._revise(i)
                continue
            react = yield from self._run_step(i)
            state.record(i, react)
            if state.paused is not None:
                return state.result()
            if self.observed:
                record = state.steps[i]
                yield self._event(
                    StepFinished,
                    step_id=str(state.plan.steps[i].step_number),
                    ok=record.status == "done",
                    seconds=clock() - step_started,
                    summary=record.result[:200],
                )
        yield from self._report()
        return state.result()

    def _make_plan(self) -> Machine[None]:
        p, state = self.p, self.state
        prompt = planning_prompt(state.task, p.tools, p.max_plan_steps)
        while True:
            plan = yield from self._ask(Plan, prompt, p.planner_system, "planner")
            problems = plan_problems(plan, max_steps=p.max_plan_steps)
            if not problems:
                break
            if not p.replan or state.replans >= p.max_replans:
                raise PlanValidationError(problems, plan=plan)
            state.replans += 1
            if self.observed:
                yield self._event(Replanned, attempt=state.replans, problems=problems)
            prompt = planning_prompt(
                state.task, p.tools, p.max_plan_steps, rejected=(plan, problems)
            )
        state.plan = Plan(steps=sorted(plan.steps, key=lambda s: s.step_number))
        state.steps = [StepRecord() for _ in plan.steps]
        if self.observed:
            yield self._event(PlanMade, plan=state.plan)

    def _run_step(self, i: int) -> Machine[ReActResult]:
        state = self.state
        step = state.plan.steps[i]
        if self.observed:
            yield self._event(
                StepStarted, step_id=str(step.step_number), description=step.description
            )
        prompt = step_prompt(state, i, self.p.max_digest_chars)
        react = self.p.step_loop.machine(
            prompt,
            run_id=f"{state.run_id}.{step.step_number}",
            parent_run_id=state.run_id,
            observed=self.observed,
            clock=self.clock,
        )
        return (yield from nested(react, state.run_id))  # its events name this run

    def _review_due(self, i: int) -> bool:
        p, state = self.p, self.state
        return p.replan and state.replans < p.max_replans and state.reviewed + 1 < i

    def _revise(self, i: int) -> Machine[None]:
        """Ask the replanner about the steps from `i` on; a valid revision replaces them."""
        p, state = self.p, self.state
        prompt = replanning_prompt(state, i, p.max_digest_chars)
        revision = yield from self._ask(PlanRevision, prompt, p.replanner_system, "replanner")
        state.reviewed = i - 1
        if revision.revise:
            notes = state.revise(i, revision, max_steps=p.max_plan_steps)
            if self.observed:
                yield self._event(Replanned, attempt=state.replans, problems=notes)

    def _report(self) -> Machine[None]:
        p, state = self.p, self.state
        if p.output_spec is not None:
            return (yield from self._typed_report(p.output_spec))
        response = yield from text_machine(
            p.reporter,
            report_prompt(state),
            system=p.reporter_system,
            max_tokens=p.max_tokens,
            loop=LOOP,
            run_id=state.run_id,
            totals=state.totals,
            role="reporter",
        )
        state.answer = response.message.text
        state.stop_reason = reply_stop(response)
        state.detail = f"reporter stop_reason={response.stop_reason}"
        if state.stop_reason == "empty":
            state.detail = "the reporter's reply was empty twice"

    def _typed_report(self, spec: OutputSpec[Any]) -> Machine[None]:
        """The reporter's answer as the loop's `output_type`."""
        p, state = self.p, self.state
        steps = sum((s.usage for s in state.steps), Usage())  # not in state.totals
        typed = yield from answer_machine(
            p.reporter,
            spec,
            report_prompt(state),
            system=p.reporter_system,
            max_retries=p.max_output_retries,
            max_tokens=p.max_tokens,
            loop=LOOP,
            run_id=state.run_id,
            answering=Answering(p.output_validator, self.observed, steps),
            role="reporter",
            totals=state.totals,
        )
        state.answer, state.output = typed.text, typed.output
        state.stop_reason, state.detail = typed.stop_reason, typed.detail

    def _ask(self, schema: type[T], prompt: str, system: str, role: str) -> Machine[T]:
        p, state = self.p, self.state
        reply = yield from structured_machine(
            p.planner,
            schema,
            prompt,
            system=system,
            max_retries=p.max_retries,
            max_tokens=p.max_tokens,
            loop=LOOP,
            run_id=state.run_id,
            totals=state.totals,
            role=role,
        )
        return reply.value

    def lifecycle(self, body: Machine[PlanExecuteResult]) -> Machine[PlanExecuteResult]:
        state = self.state

        def partial(exc: AgentLoopsError) -> PlanExecuteResult:
            """What finished, attached to a failure (the journal holds it, so `resume`
            continues)."""
            i = state.next_step()
            if isinstance(exc.result, ReActResult) and i is not None:  # the step that failed
                step = state.steps[i]
                step.usage, step.model_calls = exc.result.usage, exc.result.model_calls
                step.tool_calls = exc.result.tool_calls
                step.subruns = list(exc.result.subruns)  # their spending is in the step's
            stop: PlanStopReason = (
                "invalid_plan" if isinstance(exc, PlanValidationError) else "error"
            )
            return state.result(stop_reason=stop, detail=f"{type(exc).__name__}: {exc}")

        return lifecycle(
            body,
            loop=LOOP,
            run_id=state.run_id,
            observed=self.observed,
            clock=self.clock,
            partial=partial,
            parent_run_id=self.parent_run_id,
        )

    def _event(self, kind: type[Event], **fields: Any) -> Emit:
        return Emit(kind(loop=LOOP, run_id=self.state.run_id, **fields))
