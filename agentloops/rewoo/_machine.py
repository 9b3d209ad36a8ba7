"""The ReWOO step machine: plan, work, solve, and re-plan when allowed.

One planner call writes the plan (through structured output), the worker runs its tool
calls without the model (`rewoo._worker`), and one solver call answers from the evidence.
Rule: no I/O and no driver here; the settings come from the pipeline (`Settings`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentloops.answer import answer_machine
from agentloops.engine.effects import Emit, Machine
from agentloops.engine.runs import Clock, Totals, lifecycle
from agentloops.errors import AgentLoopsError, PlanValidationError, ToolStepFailed
from agentloops.events import PlanMade, Replanned
from agentloops.messages import SubRun, ToolOutcome
from agentloops.middleware import Chain, chained
from agentloops.model import ModelClient, ModelResponse
from agentloops.output import OutputSpec, OutputValidator
from agentloops.rewoo._plan import rewoo_problems
from agentloops.rewoo._worker import NOT_RUN, Work, work_machine
from agentloops.rewoo.prompts import planner_prompt, planner_system, solver_prompt
from agentloops.rewoo.result import ReWOOResult, ReWOOStopReason
from agentloops.rewoo.schema import ReWOOPlan
from agentloops.structured import Answering, reply_stop, structured_machine, text_machine
from agentloops.tools import ToolRegistry

LOOP = "rewoo"


class Settings(Protocol):
    """What the machine reads from its pipeline (a `ReWOOPipeline`)."""

    planner: ModelClient
    solver: ModelClient
    tools: ToolRegistry
    executor: Executor | None
    max_workers: int
    max_plan_steps: int
    on_tool_error: Literal["evidence", "abort"]
    max_replans: int
    replan_on_failure: bool
    max_evidence_chars: int
    planner_system: str
    solver_system: str
    max_retries: int
    max_tokens: int | None
    output_spec: OutputSpec[Any] | None
    output_validator: OutputValidator | None
    max_output_retries: int
    chain: Chain


@dataclass(kw_only=True)
class Run:
    """A run's state, as its machine changes it."""

    run_id: str
    totals: Totals = field(default_factory=Totals)
    replans: int = 0
    plan: ReWOOPlan | None = None
    evidence: dict[str, ToolOutcome] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    subruns: list[SubRun] = field(default_factory=list)


def machine(
    p: Settings,
    task: str,
    *,
    run_id: str,
    observed: bool,
    clock: Clock = time.perf_counter,
    parent_run_id: str | None = None,
) -> Machine[ReWOOResult]:
    """A run as a step machine (see `ReWOOPipeline.machine`); its id comes from outside."""
    run = Run(run_id=run_id)

    def partial(exc: AgentLoopsError) -> ReWOOResult:
        # ToolStepFailed is raised with its result already built.
        stop: ReWOOStopReason = "invalid_plan" if isinstance(exc, PlanValidationError) else "error"
        if exc.result is not None:
            return exc.result  # type: ignore[no-any-return]
        _count_subruns(run)  # a run stopped mid-plan (a failed sink): what came back counts
        return _result(run, "", stop, str(exc))

    body = lifecycle(
        _loop(p, run, task, observed),
        loop=LOOP,
        run_id=run.run_id,
        observed=observed,
        clock=clock,
        partial=partial,
        parent_run_id=parent_run_id,
    )
    return chained(
        body,
        p.chain,
        loop=LOOP,
        run_id=run_id,
        task=task,
        totals=run.totals,
        parent_run_id=parent_run_id,
        observed=observed,
    )


def _loop(p: Settings, run: Run, task: str, observed: bool) -> Machine[ReWOOResult]:
    feedback: tuple[str, list[str]] | None = None
    while True:
        plan = yield from plan_machine(p, run, task, observed, feedback)
        done = yield from work(p, run, plan, observed)
        failures = done.failures(plan)
        if failures and p.replan_on_failure and run.replans < p.max_replans:
            yield from _replanned(run, failures, observed)
            feedback = (plan.model_dump_json(), failures)
            continue
        if done.aborted_by is not None:
            raise aborted(run, done.aborted_by)
        break
    if p.output_spec is not None:
        return (yield from _typed(p, p.output_spec, run, task, plan, done, observed))
    response = yield from solve(p, run, task, plan, done.evidence, done.skipped)
    reason: ReWOOStopReason = reply_stop(response)
    detail = "" if reason == "answered" else f"solver stop_reason={response.stop_reason}"
    if reason == "empty":
        detail = "the solver's reply was empty twice"
    return _result(run, response.message.text, reason, detail)


# -- planner ----------------------------------------------------------------------------


def plan_machine(
    p: Settings,
    run: Run,
    task: str,
    observed: bool,
    feedback: tuple[str, list[str]] | None = None,
) -> Machine[ReWOOPlan]:
    """Ask the planner for a plan and check it, re-planning on problems when allowed."""
    system = planner_system(p.planner_system, p.tools, p.max_plan_steps)
    while True:
        prompt = planner_prompt(task, *feedback) if feedback else planner_prompt(task)
        reply = yield from structured_machine(
            p.planner,
            ReWOOPlan,
            prompt,
            system=system,
            max_retries=p.max_retries,
            max_tokens=p.max_tokens,
            loop=LOOP,
            run_id=run.run_id,
            totals=run.totals,
            role="planner",
        )
        run.plan = plan = reply.value
        problems = rewoo_problems(plan, p.tools, p.max_plan_steps)
        if not problems:
            if observed:
                yield Emit(PlanMade(loop=LOOP, run_id=run.run_id, plan=plan))
            return plan
        if run.replans >= p.max_replans:
            raise PlanValidationError(problems, plan=plan)
        yield from _replanned(run, problems, observed)
        feedback = (reply.raw, problems)


def _replanned(run: Run, problems: list[str], observed: bool) -> Machine[None]:
    run.replans += 1
    if observed:
        yield Emit(Replanned(loop=LOOP, run_id=run.run_id, attempt=run.replans, problems=problems))


# -- worker -----------------------------------------------------------------------------


def work(p: Settings, run: Run, plan: ReWOOPlan, observed: bool) -> Machine[Work]:
    """Run the plan's tool calls; the evidence goes on `run`."""
    # Without an executor the machine bounds the parallel steps; an executor has its own.
    limit = p.max_workers if p.executor is None else max(len(plan.steps), 1)
    run.evidence, run.skipped = {}, []  # filled as steps finish, for a partial result
    done = yield from work_machine(
        plan,
        p.tools,
        attempt=run.replans,
        limit=limit,
        abort=p.on_tool_error == "abort",
        observed=observed,
        run_id=run.run_id,
        progress=run.evidence,
    )
    run.evidence, run.skipped = done.evidence, done.skipped
    _count_subruns(run)
    return done


def _count_subruns(run: Run) -> None:
    """Agent tools' sub-runs in the evidence: what each spent counts, once, and the run
    lists it."""
    known = {id(s) for s in run.subruns}
    for outcome in run.evidence.values():
        sub = outcome.run
        if sub is not None and id(sub) not in known:
            run.totals.absorb(sub)
            run.subruns.append(sub)


def aborted(run: Run, step_id: str) -> ToolStepFailed:
    """The error that stops an `on_tool_error="abort"` run, carrying what finished."""
    outcome = run.evidence[step_id]
    total = len(run.plan.steps) if run.plan else len(run.evidence)
    message = (
        f"step {step_id} failed with on_tool_error='abort': {outcome.content:.300}; "
        f"{len(run.evidence)} of {total} steps finished"
    )
    return ToolStepFailed(message, result=_result(run, "", "tool_failed", message))


# -- solver -----------------------------------------------------------------------------


def solve(
    p: Settings,
    run: Run,
    task: str,
    plan: ReWOOPlan,
    evidence: Mapping[str, ToolOutcome],
    skipped: list[str],
) -> Machine[ModelResponse]:
    """One solver call: the answer from the task and every step's evidence."""
    prompt = solver_prompt(task, plan, evidence, set(skipped), p.max_evidence_chars)
    return (
        yield from text_machine(
            p.solver,
            prompt,
            system=p.solver_system,
            max_tokens=p.max_tokens,
            loop=LOOP,
            run_id=run.run_id,
            totals=run.totals,
            role="solver",
        )
    )


def _typed(
    p: Settings,
    spec: OutputSpec[Any],
    run: Run,
    task: str,
    plan: ReWOOPlan,
    done: Work,
    observed: bool,
) -> Machine[ReWOOResult]:
    """The solver's answer as the pipeline's `output_type`."""
    prompt = solver_prompt(task, plan, done.evidence, set(done.skipped), p.max_evidence_chars)
    typed = yield from answer_machine(
        p.solver,
        spec,
        prompt,
        system=p.solver_system,
        max_retries=p.max_output_retries,
        max_tokens=p.max_tokens,
        loop=LOOP,
        run_id=run.run_id,
        answering=Answering(p.output_validator, observed),
        role="solver",
        totals=run.totals,
    )
    return _result(run, typed.text, typed.stop_reason, typed.detail, typed.output)


def not_run(outcome: ToolOutcome) -> bool:
    """Whether the evidence says its step was not run (a dependency failed)."""
    return outcome.content.startswith(NOT_RUN)


def _result(
    run: Run, answer: str, reason: ReWOOStopReason, detail: str, output: Any = None
) -> ReWOOResult:
    evidence = run.evidence
    if run.plan is not None and len(evidence) < len(run.plan.steps):  # stopped part-way
        order = [s.step_id for s in run.plan.steps]
        evidence = {k: evidence[k] for k in order if k in evidence}
    return ReWOOResult(
        answer=answer,
        plan=run.plan,
        evidence=evidence,
        usage=run.totals.usage,
        model_calls=run.totals.model_calls,
        replans=run.replans,
        run_id=run.run_id,
        stop_reason=reason,
        skipped=run.skipped,
        detail=detail,
        output=output,
        subruns=run.subruns,
    )
