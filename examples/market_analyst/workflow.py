"""The Market Analyst graph: route, research, write, evaluate, then wait for a person.

A `Router` sends clear quick looks to a ReWOO flash briefing, and analysis or unclear
requests to Plan-and-Execute deep research (with re-planning). A writer fills the
structured `AnalystReport` from the research notes and tool outputs; a code check and a
fresh-context `Evaluator` check its figures against those outputs; the run is saved as
pending. Every stage's result is saved before the next begins, so a run that fails
part-way continues where it stopped.

The stages are written once, as a generator that yields each component call it needs
(`_Call`: the blocking method and its asyncio twin, same arguments); `proceed` performs
them in this thread (the command line), `aproceed` on the event loop (the web app).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from agentloops import (
    CheckpointError,
    Evaluator,
    Event,
    EventSink,
    ModelClient,
    PlanAndExecute,
    ReWOOPipeline,
    Router,
    Usage,
    ask_structured,
)
from agentloops.plan_execute import PLANNER_SYSTEM, REPORTER_SYSTEM
from agentloops.rewoo import PLANNER_SYSTEM as REWOO_PLANNER_SYSTEM
from agentloops.structured import aask_structured  # not re-exported by agentloops (yet)
from market_analyst.archive import ArchivedReport
from market_analyst.evidence import StepEvidence, item
from market_analyst.meter import Meter
from market_analyst.prompts import (
    CRITERIA,
    DEEP,
    FLASH,
    ROUTER_SYSTEM,
    ROUTES,
    WRITER_SYSTEM,
    memory_block,
    writer_prompt,
)
from market_analyst.report import (
    AnalystReport,
    evidence_lines,
    source_names,
    to_markdown,
    unsupported_figures,
)
from market_analyst.store import PENDING, RunStore
from market_analyst.tickers import tickers_in
from market_analyst.tools import RESEARCH_TOOLS

MODES = {"flash": FLASH, "deep": DEEP}
"""`--mode` values and the route each one forces ("auto" asks the router)."""

Notify = Callable[[str, dict[str, Any]], None]
"""Called after each stage ("route", "draft", "verdict") with the updated record."""


@dataclasses.dataclass(frozen=True)
class _Call:
    """A component call a stage needs: `run(*args, **kwargs)` blocks, `arun` awaits."""

    run: Callable[..., Any]
    arun: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


_Stages = Generator[_Call, Any, Any]
"""Stage code: yields the calls it needs, is sent their results (or thrown their errors)."""


def _tee(*sinks: EventSink | None) -> EventSink:
    live = [s for s in sinks if s is not None]

    def sink(event: Event) -> None:
        for s in live:
            s(event)

    return sink


class Analyst:
    """The whole graph. Roles without their own client use `model`.

    Args:
        model: the router, solver, reporter, writer and evaluator.
        store: where records and loop checkpoints are saved.
        planner: the ReWOO and Plan-and-Execute planner (and replanner).
        executor: runs each Plan-and-Execute step.
        on_event: receives every loop event (the live view).
        notify: told after each stage, for display.
    """

    def __init__(
        self,
        model: ModelClient,
        store: RunStore,
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
        """Check the request and save the new run's record (with its memory); nothing runs.

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
        """Do whatever stages this run still lacks; returns the pending record.

        On an error the record keeps every finished stage, the usage spent and the error.
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
        meter = Meter()
        try:
            if "route" not in record:
                record = self.store.update(run_id, **(yield from self._route(meter, record)))
                self.notify("route", record)
            if "notes" not in record:
                notes, evidence = yield from self._research(meter, record)
                record = self.store.update(run_id, notes=notes, evidence=evidence)
            if "draft" not in record:
                record = self.store.update(run_id, **(yield from self._write(meter, record)))
                self.notify("draft", record)
            if "verdict" not in record:
                verdict = yield from self._evaluate(meter, record)
                record = self.store.update(run_id, verdict=verdict, status=PENDING, error=None)
                self.notify("verdict", record)
        except BaseException as exc:
            self.store.update(run_id, error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._add_usage(run_id, meter)
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
        run_id, memory = record["run_id"], record.get("memory", "")
        planner, main = meter.wrap(self.planner), meter.wrap(self.model)
        if record["route"] == FLASH:
            flash = ReWOOPipeline(
                planner,
                RESEARCH_TOOLS,
                solver=main,
                planner_system=f"{REWOO_PLANNER_SYSTEM}\n{memory}",
                on_event=self.on_event,
            )
            result = yield _Call(flash.run, flash.arun, (record["request"],), {"run_id": run_id})
            result.raise_for_stop()
            steps = result.plan.steps if result.plan else []
            evidence = [
                item(s.tool_name, s.tool_args, result.evidence[s.step_id])
                for s in steps
                if s.step_id in result.evidence
            ]
            return result.answer, evidence

        # The tool outputs are the evidence: collected from the events, and saved at
        # each finished step (a resumed run does not repeat those calls).
        def save(items: list[dict[str, Any]]) -> None:
            self.store.update(run_id, evidence=items)

        collected = StepEvidence(record.get("evidence", []), save)
        deep = PlanAndExecute(
            planner,
            RESEARCH_TOOLS,
            executor=meter.wrap(self.executor),
            reporter=main,
            replan=True,
            checkpointer=self.store.loops,
            on_event=_tee(collected, self.on_event),
            planner_system=f"{PLANNER_SYSTEM}\n{memory}",
            reporter_system=f"{REPORTER_SYSTEM}\n{memory}",
        )
        if record.get("research_started"):
            try:
                resumed = yield _Call(deep.resume, deep.aresume, (run_id,))
                resumed.raise_for_stop()
                return resumed.answer, collected.items
            except CheckpointError:
                pass  # nothing was saved before the stop: start the research again
        self.store.update(run_id, research_started=True)
        outcome = yield _Call(deep.run, deep.arun, (record["request"],), {"run_id": run_id})
        outcome.raise_for_stop()
        return outcome.answer, collected.items

    def _write(self, meter: Meter, record: dict[str, Any]) -> _Stages:
        """Fill the structured report, render it, and check its figures in code."""
        evidence = record["evidence"]
        prompt = writer_prompt(
            record["request"], record["notes"], evidence_lines(evidence), record.get("memory", "")
        )
        options = {
            "system": WRITER_SYSTEM,
            "on_event": self.on_event,
            "loop": "writer",
            "run_id": record["run_id"],
        }
        ask = (meter.wrap(self.model), AnalystReport, prompt)
        reply = yield _Call(ask_structured, aask_structured, ask, options)
        report = reply.value
        return {
            "draft_record": report.model_dump(),
            "draft": to_markdown(report, source_names(evidence)),
            "figure_problems": unsupported_figures(report, evidence),
        }

    def _evaluate(self, meter: Meter, record: dict[str, Any]) -> _Stages:
        """The evaluator's vote; a failed figure check makes it a fail whatever the vote
        (a gate must not fail open)."""
        evidence: dict[str, str] = evidence_lines(record["evidence"])
        if record.get("memory"):
            evidence["memory"] = record["memory"]
        evaluator = Evaluator(meter.wrap(self.model), criteria=CRITERIA, on_event=self.on_event)
        task_draft = (record["request"], record["draft"], evidence)
        verdict = yield _Call(evaluator.evaluate, evaluator.aevaluate, task_draft)
        problems = record.get("figure_problems", [])
        if problems:
            reasons = [f"figure check: {p}" for p in problems] + list(verdict.reasons)
            return {"verdict": "fail", "reasons": reasons}
        return {"verdict": verdict.verdict, "reasons": list(verdict.reasons)}

    def _add_usage(self, run_id: str, meter: Meter) -> None:
        """Add this process's spend to the record's, so a resumed run reports its total."""
        record = self.store.get(run_id)
        total = Usage(**record.get("usage", {})) + meter.usage
        calls = dict(record.get("calls_by_role", {}))
        for role, n in meter.calls.items():
            calls[role] = calls.get(role, 0) + n
        self.store.update(run_id, usage=dataclasses.asdict(total), calls_by_role=calls)
