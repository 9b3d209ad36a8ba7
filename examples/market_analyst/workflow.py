"""The Market Analyst graph: route, research into a typed report, evaluate, then wait for a
person.

A `Router` sends clear quick looks to a ReWOO flash briefing, and analysis or unclear
requests to Plan-and-Execute deep research (with re-planning). The research loop's final
answer is the structured `AnalystReport` (`output_type=`: the ReWOO solver, or the
Plan-and-Execute reporter, fills it), and the figure check is its `output_validator`: a
key figure its cited evidence does not hold goes back to the model, which fixes it. There
is no separate writer call. A fresh-context `Evaluator` then checks the draft against the
tool outputs, and the run waits for a person.

The run is a journal on the library's run store, worked on under its lease: each stage's
result is appended before the next begins, with the usage it cost. The research loops are
durable runs of their own (`RUN_ID/research`): a run stopped mid-research (Ctrl-C, a model
error, a killed process) is resumed from their journal, and no model or tool call on
record is made again.

The stages are written once, as a generator that yields each component call it needs
(`_Call`: the blocking method and its asyncio twin, same arguments); `proceed` performs
them in this thread (the command line), `aproceed` on the event loop (the web app).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from agentloops import (
    Compaction,
    Evaluator,
    EventSink,
    InvalidOutput,
    ModelClient,
    ModelRetry,
    OutputContext,
    PlanAndExecute,
    ReWOOPipeline,
    Router,
    SQLiteStore,
)
from agentloops.plan_execute import PLANNER_SYSTEM, REPORTER_SYSTEM
from agentloops.rewoo import PLANNER_SYSTEM as REWOO_PLANNER_SYSTEM
from agentloops.rewoo import TYPED_SOLVER_SYSTEM
from market_analyst import journal
from market_analyst.archive import ArchivedReport
from market_analyst.evidence import from_journal
from market_analyst.meter import Meter
from market_analyst.prompts import (
    CRITERIA,
    DEEP,
    FLASH,
    REPORT_RULES,
    ROUTER_SYSTEM,
    ROUTES,
    memory_block,
)
from market_analyst.report import (
    AnalystReport,
    evidence_lines,
    source_names,
    to_markdown,
    unsupported_figures,
)
from market_analyst.store import PENDING, AnalystStore, research_run
from market_analyst.tickers import tickers_in
from market_analyst.tools import RESEARCH_TOOLS

MODES = {"flash": FLASH, "deep": DEEP}
FIGURE_RETRIES = 2
"""How many times the figure check sends a report back (`max_output_retries`); the last
answer is kept, its problems recorded, and the draft's gate then fails it for a person."""
"""`--mode` values and the route each one forces ("auto" asks the router)."""

Notify = Callable[[str, dict[str, Any]], None]
"""Called after each stage ("route", "draft", "verdict") with the updated record."""

_Entries = list[tuple[str, dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class _Call:
    """A component call a stage needs: `run(*args, **kwargs)` blocks, `arun` awaits."""

    run: Callable[..., Any]
    arun: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


_Stages = Generator[_Call, Any, Any]
"""Stage code: yields the calls it needs, is sent their results (or thrown their errors)."""


class Analyst:
    """The whole graph. Roles without their own client use `model`.

    Args:
        model: the router, solver, reporter and evaluator.
        store: the runs' journals (the research loops' too), the profile and the archive.
        planner: the ReWOO and Plan-and-Execute planner (and replanner).
        executor: runs each Plan-and-Execute step.
        on_event: receives every loop event (the live view).
        notify: told after each stage, for display.
    """

    def __init__(
        self,
        model: ModelClient,
        store: AnalystStore,
        *,
        planner: ModelClient | None = None,
        executor: ModelClient | None = None,
        on_event: EventSink | None = None,
        notify: Notify | None = None,
    ):
        self.model, self.store = model, store
        self.planner, self.executor = planner or model, executor or model
        self.on_event = on_event
        self.notify = notify or (lambda stage, record: None)

    def run(
        self, request: str, run_id: str, *, mode: str = "auto", **fields: Any
    ) -> dict[str, Any]:
        """Start a run and take it to the approval pause. `fields` are saved on the record
        (the CLI saves the model settings, so `--resume` continues on the same model)."""
        self.start(request, run_id, mode=mode, **fields)
        return self.proceed(run_id)

    async def arun(
        self, request: str, run_id: str, *, mode: str = "auto", **fields: Any
    ) -> dict[str, Any]:
        """`run` on the event loop."""
        self.start(request, run_id, mode=mode, **fields)
        return await self.aproceed(run_id)

    def start(self, request: str, run_id: str, *, mode: str = "auto", **fields: Any) -> None:
        """Check the request and start the new run's journal (with its memory); nothing runs.

        Raises:
            ValueError: a blank request or an unknown mode.
        """
        if not request.strip():
            raise ValueError("the request is empty")
        if mode != "auto" and mode not in MODES:
            raise ValueError(f"mode must be auto, flash or deep, got {mode!r}")
        memory = memory_block(self.store.profile.get(), self._last_reports(request))
        self.store.create(run_id, request, mode=mode, memory=memory, **fields)

    def _last_reports(self, request: str) -> list[ArchivedReport]:
        found = (self.store.archive.latest_for(t) for t in tickers_in(request))
        return list({r.run_id: r for r in found if r is not None}.values())

    def proceed(self, run_id: str) -> dict[str, Any]:
        """Do whatever stages this run still lacks, holding its lease; returns the pending
        record. On an error the journal keeps every finished stage, the usage spent and
        the error.

        Raises:
            RunLeased: another process works on this run now (it names who, until when).
        """
        stages = self._stages(run_id)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                call = stages.send(value) if error is None else stages.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                value, error = call.run(*call.args, **call.kwargs), None
            except BaseException as exc:  # Ctrl-C too: the stages note where the run stopped
                value, error = None, exc

    async def aproceed(self, run_id: str) -> dict[str, Any]:
        """`proceed` on the event loop. Cancelling it cancels the stage in flight; the
        record notes where the run stopped, and `proceed` or `aproceed` continues it."""
        stages = self._stages(run_id)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                call = stages.send(value) if error is None else stages.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                value, error = await call.arun(*call.args, **call.kwargs), None
            except BaseException as exc:  # cancellation too, for the record
                value, error = None, exc

    def _stages(self, run_id: str) -> _Stages:
        record = self.store.get(run_id)
        if "verdict" in record:
            return record  # nothing left to do: no need to hold it
        meter = Meter()
        with self.store.hold(run_id) as run:
            record = run.record
            try:
                if "route" not in record:
                    route = yield from self._route(meter, record)
                    record = run.add("route", route, also=_spent(meter))
                    self.notify("route", record)
                if "notes" not in record:
                    research = yield from self._research(meter, record)
                    record = run.add("research", research, also=_spent(meter))
                if "draft" not in record:
                    record = run.add("draft", _draft(record))
                    self.notify("draft", record)
                if "verdict" not in record:
                    verdict = {"verdict": (yield from self._evaluate(meter, record))}
                    record = run.add("verdict", verdict, status=PENDING, also=_spent(meter))
                    self.notify("verdict", record)
            except BaseException as exc:  # Ctrl-C and cancellation too: say where it stopped
                also = _spent(meter)
                if isinstance(exc, InvalidOutput):  # the report never filled: the next try is
                    also.append(("research_failed", {"detail": str(exc)}))  # a new research run
                with contextlib.suppress(Exception):  # if that fails, the first error counts
                    run.add("stopped", {"error": f"{type(exc).__name__}: {exc}"}, also=also)
                raise
        return self.store.get(run_id)

    def _route(self, meter: Meter, record: dict[str, Any]) -> _Stages:
        mode = record.get("mode", "auto")
        if mode in MODES:
            why = f"Forced by --mode {mode}; the router was not asked."
            return {"route": MODES[mode], "route_reasoning": why}
        router = Router(
            meter.wrap(self.model),
            ROUTES,
            default=DEEP,
            system=ROUTER_SYSTEM,
            on_event=self.on_event,
        )
        decision = yield _Call(router.route, router.aroute, (record["request"],))
        return {"route": decision.route, "route_reasoning": decision.reasoning}

    def _research(self, meter: Meter, record: dict[str, Any]) -> _Stages:
        """The research loop, durable (started, or resumed from its journal), whose final
        answer is the report: its notes (the answer as JSON), evidence and report record."""
        run_id, memory = record["run_id"], record.get("memory", "")
        window = _window(record)
        planner, main = meter.wrap(self.planner), meter.wrap(self.model)
        runs, ttl = self.store.runs, self.store.lease_ttl
        loop_id = research_run(run_id, record.get("research_attempts", 0) + 1)
        typed: dict[str, Any] = {
            "output_type": AnalystReport,
            "output_validator": figure_check(runs, loop_id),
            "max_output_retries": FIGURE_RETRIES,
        }
        loop: ReWOOPipeline | PlanAndExecute
        if record["route"] == FLASH:
            loop = ReWOOPipeline(
                planner,
                RESEARCH_TOOLS,
                solver=main,
                planner_system=f"{REWOO_PLANNER_SYSTEM}\n{memory}",
                solver_system=f"{TYPED_SOLVER_SYSTEM}\n{REPORT_RULES}\n{memory}",
                on_event=self.on_event,
                store=runs,
                lease_ttl=ttl,
                compaction=window,
                **typed,
            )
        else:
            loop = PlanAndExecute(
                planner,
                RESEARCH_TOOLS,
                executor=meter.wrap(self.executor),
                reporter=main,
                replan=True,
                on_event=self.on_event,
                planner_system=f"{PLANNER_SYSTEM}\n{memory}",
                reporter_system=f"{REPORTER_SYSTEM}\n{REPORT_RULES}\n{memory}",
                store=runs,
                lease_ttl=ttl,
                compaction=window,
                **typed,
            )
        drive = (loop, runs, record["request"], loop_id)
        result = yield _Call(journal.drive, journal.adrive, drive, {"ttl": ttl})
        result.raise_for_stop()  # e.g. InvalidOutput: no report after its retries
        # The tool outputs are the evidence, read from the journal: a resumed run's replayed
        # calls send no events, and the journal holds every call of every process.
        evidence = from_journal(runs.read(loop_id))
        return {
            "notes": result.answer,
            "evidence": evidence,
            "draft_record": result.output.model_dump(mode="json"),
        }

    def _evaluate(self, meter: Meter, record: dict[str, Any]) -> _Stages:
        """The evaluator's vote; a failed figure check makes it a fail whatever the vote
        (a gate must not fail open)."""
        evidence: dict[str, str] = evidence_lines(record["evidence"])
        if record.get("memory"):
            evidence["memory"] = record["memory"]
        window = _window(record)
        evaluator = Evaluator(
            meter.wrap(self.model),
            criteria=CRITERIA,
            on_event=self.on_event,
            middleware=[Compaction(window)] if window else (),
        )
        task_draft = (record["request"], record["draft"], evidence)
        verdict = yield _Call(evaluator.evaluate, evaluator.aevaluate, task_draft)
        problems = record.get("figure_problems", [])
        if problems:
            reasons = [f"figure check: {p}" for p in problems] + list(verdict.reasons)
            return {"verdict": "fail", "reasons": reasons}
        return {"verdict": verdict.verdict, "reasons": list(verdict.reasons)}


def figure_check(runs: SQLiteStore, loop_id: str) -> Any:
    """The research loop's output validator: every key figure must be in the evidence it
    cites (read from the run's journal, which holds every tool output so far). A report
    that fails goes back with the problems, `FIGURE_RETRIES` times; the last one is kept
    as it is, and `_draft` records its problems, so the evaluator's vote becomes a fail and
    a person decides (the gate never fails open)."""

    def check(report: AnalystReport, context: OutputContext) -> AnalystReport:
        problems = unsupported_figures(report, from_journal(runs.read(loop_id)))
        if problems and context.retries < FIGURE_RETRIES:
            raise ModelRetry(
                "these key figures are not in the evidence they cite: "
                + "; ".join(problems)
                + ". Copy each figure exactly from the output it cites, or leave it out"
            )
        return report

    return check


def _draft(record: dict[str, Any]) -> dict[str, Any]:
    """The draft from the research's report record: its Markdown and the figure check's
    findings (empty unless the last answer the validator kept still had problems)."""
    report = AnalystReport.model_validate(record["draft_record"])
    evidence = record["evidence"]
    return {
        "draft_record": record["draft_record"],
        "draft": to_markdown(report, source_names(evidence)),
        "figure_problems": unsupported_figures(report, evidence),
    }


def _window(record: dict[str, Any]) -> int | None:
    """The model's context window the run was started with (`--context-window`), if any:
    its research and its evaluator compact what the model sees to stay within it."""
    window = (record.get("settings") or {}).get("context_window")
    return int(window) if window else None


def _spent(meter: Meter) -> _Entries:
    """The usage record for what `meter` counted since the last one (none if nothing)."""
    spent = meter.take()
    return [("usage", spent)] if spent is not None else []
