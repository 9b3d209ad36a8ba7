"""The Market Analyst graph: route, research, evaluate, then wait for a person.

A `Router` sends quick looks to a ReWOO flash briefing and analysis to Plan-and-Execute
deep research. Either way the draft goes to an `Evaluator` that sees only the request,
the draft and the tool outputs, and the run is saved as pending. Every stage's result
is saved before the next begins, so a run that fails part-way continues where it
stopped (Plan-and-Execute also resumes mid-research from its own checkpoints).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from typing import Any

from agentloops import (
    CheckpointError,
    Evaluator,
    Event,
    EventSink,
    ModelClient,
    ModelRequest,
    ModelResponse,
    PlanAndExecute,
    ReWOOPipeline,
    Router,
    StepFinished,
    ToolCallFinished,
    ToolCallStarted,
    ToolOutcome,
    Usage,
)
from market_analyst.demo_model import role_of
from market_analyst.store import PENDING, RunStore
from market_analyst.tools import RESEARCH_TOOLS
from market_analyst.writers import DEEP, FLASH

ROUTES = {
    FLASH: "A quick factual look at one to three tickers (price, recent moves, headlines): "
    "a ReWOO flash briefing plans every look-up up front and runs them in parallel.",
    DEEP: "Analysis (an investment thesis, strategic risks, a comparison): Plan-and-Execute "
    "deep research, where each step sees its own tool results before the next.",
}
CRITERIA = (
    "Every figure in the draft must appear in the evidence (the tool outputs); a figure "
    "found in no tool output is invented: vote fail. If a tool reported an unknown ticker "
    "or other missing data, the draft cannot be fully checked: vote needs_human. Vote pass "
    "only when the draft answers the request from the evidence."
)

Notify = Callable[[str, dict[str, Any]], None]
"""Called after each stage ("route", "draft", "verdict") with the updated record."""


class Meter:
    """A `ModelClient` wrapper that totals usage and counts calls per role. Thread-safe."""

    def __init__(self, model: ModelClient):
        self.model = model
        self.usage = Usage()
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.model.complete(request)
        role = role_of(request)
        with self._lock:
            self.usage = self.usage + response.usage
            self.calls[role] = self.calls.get(role, 0) + 1
        return response


class _Evidence:
    """Collects tool calls from events; saves them at each finished research step."""

    def __init__(self, store: RunStore, run_id: str, earlier: list[dict[str, Any]]):
        self.store, self.run_id = store, run_id
        self.items = list(earlier)
        self._args: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            with self._lock:
                self._args[event.call_id] = event.args
        elif isinstance(event, ToolCallFinished):
            item = _item(event.name, self._args.get(event.call_id, {}), event.outcome)
            with self._lock:
                self.items.append(item)
        elif isinstance(event, StepFinished) and event.loop == "plan_execute":
            with self._lock:
                items = list(self.items)
            self.store.update(self.run_id, evidence=items)


def _item(name: str, args: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
    return {"name": name, "args": args, "is_error": outcome.is_error, "content": outcome.content}


def evidence_texts(evidence: list[dict[str, Any]]) -> list[str]:
    """One line per tool call, as the evaluator sees it."""
    out = []
    for e in evidence:
        args = json.dumps(e["args"], sort_keys=True)
        mark = "ERROR " if e["is_error"] else ""
        out.append(f"{e['name']}({args}) -> {mark}{e['content']}")
    return out


def _tee(*sinks: EventSink | None) -> EventSink:
    live = [s for s in sinks if s is not None]

    def sink(event: Event) -> None:
        for s in live:
            s(event)

    return sink


class Analyst:
    """The whole graph over one model (each role may also get its own client).

    Args:
        model: the `ModelClient` every role uses.
        store: where records and loop checkpoints are saved.
        on_event: receives every loop event (the live view).
        notify: told after each stage, for display.
    """

    def __init__(
        self,
        model: ModelClient,
        store: RunStore,
        *,
        on_event: EventSink | None = None,
        notify: Notify | None = None,
    ):
        self.model = model
        self.store = store
        self.on_event = on_event
        self.notify = notify or (lambda stage, record: None)

    def run(self, request: str, run_id: str, *, model_name: str = "") -> dict[str, Any]:
        """Start a run and take it to the approval pause."""
        self.store.create(run_id, request)
        self.store.update(run_id, model=model_name)
        return self.proceed(run_id)

    def proceed(self, run_id: str) -> dict[str, Any]:
        """Do whatever stages this run still lacks; returns the pending record.

        On an error the record keeps every finished stage, the usage spent and the error.
        """
        record = self.store.get(run_id)
        meter = Meter(self.model)
        try:
            if "route" not in record:
                decision = Router(meter, ROUTES, default=DEEP, on_event=self.on_event).route(
                    record["request"]
                )
                record = self.store.update(
                    run_id, route=decision.route, route_reasoning=decision.reasoning
                )
                self.notify("route", record)
            if "draft" not in record:
                draft, evidence = self._research(meter, record)
                record = self.store.update(run_id, draft=draft, evidence=evidence)
                self.notify("draft", record)
            if "verdict" not in record:
                verdict = Evaluator(meter, criteria=CRITERIA, on_event=self.on_event).evaluate(
                    record["request"], record["draft"], evidence_texts(record["evidence"])
                )
                record = self.store.update(
                    run_id,
                    verdict={"verdict": verdict.verdict, "reasons": list(verdict.reasons)},
                    status=PENDING,
                    error=None,
                )
                self.notify("verdict", record)
        except Exception as exc:
            self.store.update(run_id, error=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self._add_usage(run_id, meter)
        return self.store.get(run_id)

    def _research(self, meter: Meter, record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        run_id = record["run_id"]
        if record["route"] == FLASH:
            flash = ReWOOPipeline(meter, RESEARCH_TOOLS, on_event=self.on_event)
            result = flash.run(record["request"], run_id=run_id)
            result.raise_for_stop()
            steps = result.plan.steps if result.plan else []
            return result.answer, [
                _item(s.tool_name, s.tool_args, result.evidence[s.step_id])
                for s in steps
                if s.step_id in result.evidence
            ]
        # The tool outputs are the evaluator's evidence: collected from the events, and
        # saved at each finished step (a resumed run does not repeat those calls).
        collected = _Evidence(self.store, run_id, record.get("evidence", []))
        sink = _tee(collected, self.on_event)
        deep = PlanAndExecute(meter, RESEARCH_TOOLS, checkpointer=self.store.loops, on_event=sink)
        if record.get("research_started"):
            try:
                resumed = deep.resume(run_id)
                resumed.raise_for_stop()
                return resumed.answer, collected.items
            except CheckpointError:
                pass  # nothing was saved before the stop: start the research again
        self.store.update(run_id, research_started=True)
        outcome = deep.run(record["request"], run_id=run_id)
        outcome.raise_for_stop()
        return outcome.answer, collected.items

    def _add_usage(self, run_id: str, meter: Meter) -> None:
        """Add this process's spend to the record's, so a resumed run reports its total."""
        record = self.store.get(run_id)
        total = Usage(**record.get("usage", {})) + meter.usage
        calls = dict(record.get("calls_by_role", {}))
        for role, n in meter.calls.items():
            calls[role] = calls.get(role, 0) + n
        self.store.update(run_id, usage=dataclasses.asdict(total), calls_by_role=calls)
