"""The loops that recorded the replay corpus, built the same way every time.

Fixed prompts and settings, tools that write to a `Ledger` (the side-effect ledger the
replay tests read), and models that answer from the request: where the transcript is,
never how often they were asked, so a resumed run is asked only for what its journal
lacks. These builders are frozen with the corpus: a file is resumed by the loop its
kind builds today, so change one and the old files stop matching it. Add a new task
(and a scenario in scenarios.py) instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentloops import (
    ModelRequest,
    ModelResponse,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    RunStore,
    ToolCall,
    Usage,
    idempotency_key,
    tool,
)
from agentloops.testing import FunctionModel, respond, respond_structured, use_tools

USAGE = Usage(input_tokens=100, output_tokens=20)
"""Every scripted response's usage, so a replay's totals can be checked."""


class ProcessDied(BaseException):
    """Stands for the process dying (not an Exception: nothing in the loop records it)."""


@dataclass
class Ledger:
    """What a loop's tools and models did, in order: the side-effect ledger."""

    ran: list[list[Any]] = field(default_factory=list)
    """[tool name, idempotency key] of each tool call that ran."""
    asked: list[str] = field(default_factory=list)
    """What each model request was for ("plan", "solve", "c1", ...)."""
    die_in: str | None = None
    """At recording: the tool, or the model purpose, the process dies in (once)."""

    def tool_ran(self, name: str) -> None:
        self.ran.append([name, idempotency_key()])
        self._maybe_die(name)  # after the effect: it took effect, its outcome is lost

    def model_asked(self, purpose: str) -> None:
        self.asked.append(purpose)
        self._maybe_die(purpose)

    def _maybe_die(self, where: str) -> None:
        if self.die_in == where:
            self.die_in = None
            raise ProcessDied(where)


# -- tools ------------------------------------------------------------------------------

WEATHER = {"Paris": "Paris: 18C, light rain", "Rome": "Rome: 24C, sunny"}
INVOICES = {"INV-7": "INV-7: 120 EUR to ACME, due 2025-07-01"}


def _tools(ledger: Ledger) -> list[Any]:
    @tool
    def weather(city: str) -> str:
        """The weather in a city now."""
        ledger.tool_ran("weather")
        if city not in WEATHER:
            raise LookupError(f"no such city: {city}")
        return WEATHER[city]

    @tool
    def warmer(a: str, b: str) -> str:
        """Which of two weather reports ("City: 18C, ...") is warmer."""
        ledger.tool_ran("warmer")
        temperature = {s: int(re.findall(r"(-?\d+)C", s)[0]) for s in (a, b)}
        return max((a, b), key=temperature.__getitem__).split(":")[0]

    @tool
    def advice(report: str) -> str:
        """What to wear for a weather report."""
        ledger.tool_ran("advice")
        return "an umbrella" if "rain" in report else "sunglasses"

    @tool
    def lookup_invoice(invoice: str) -> str:
        """An invoice's amount, payee and due date."""
        ledger.tool_ran("lookup_invoice")
        return INVOICES[invoice]

    @tool(read_only=False, requires_approval=True)
    def pay(invoice: str, amount: int) -> str:
        """Pay an invoice (a person approves each payment)."""
        ledger.tool_ran("pay")
        return f"paid {amount} EUR for {invoice}"

    @tool(read_only=False)  # a side effect: on_doubt="ask"
    def transfer(to: str, amount: int) -> str:
        """Transfer money."""
        ledger.tool_ran("transfer")
        return f"sent {amount} EUR to {to}"

    return [weather, warmer, advice, lookup_invoice, pay, transfer]


# -- models that answer from the request ----------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One model turn of a ReAct transcript: tool calls, or the answer (`calls` empty)."""

    purpose: str
    calls: tuple[ToolCall, ...] = ()
    answer: str = ""


def _react_reply(turns: list[Turn], request: ModelRequest, ledger: Ledger) -> ModelResponse:
    """The first turn whose calls have no result in the transcript yet: what the model
    says depends on where the transcript is, never on how often it was asked."""
    answered = {r.call_id for m in request.messages for r in m.tool_results}
    for turn in turns:
        if turn.calls and all(c.id in answered for c in turn.calls):
            continue
        ledger.model_asked(turn.purpose)
        if turn.calls:
            return use_tools(*turn.calls, usage=USAGE)
        return respond(turn.answer, usage=USAGE)
    raise AssertionError(f"no turn left for a transcript of {len(request.messages)} messages")


REACT_TURNS: dict[str, list[Turn]] = {
    "Compare the weather in Paris and Rome.": [
        Turn(
            "c1,c2",
            (
                ToolCall("c1", "weather", {"city": "Paris"}),
                ToolCall("c2", "weather", {"city": "Rome"}),
            ),
        ),
        Turn("answer", answer="Rome is warmer (24C, sunny) than Paris (18C, light rain)."),
    ],
    "Pay invoice INV-7.": [
        Turn("c1", (ToolCall("c1", "lookup_invoice", {"invoice": "INV-7"}),)),
        Turn("c2", (ToolCall("c2", "pay", {"invoice": "INV-7", "amount": 120}),)),
        Turn("answer", answer="Paid INV-7: 120 EUR to ACME."),
    ],
    "Send 100 EUR to Bob.": [
        Turn("t1", (ToolCall("t1", "transfer", {"to": "Bob", "amount": 100}),)),
        Turn("answer", answer="Sent 100 EUR to Bob."),
    ],
    "What should I wear in Paris?": [
        Turn("c1", (ToolCall("c1", "weather", {"city": "Paris"}),)),
        Turn("c2", (ToolCall("c2", "advice", {"report": WEATHER["Paris"]}),)),
        Turn("answer", answer="Take an umbrella: 18C and light rain."),
    ],
}

REACT_SYSTEM = "You are the replay corpus's ReAct agent. Use the tools, then answer."


def react(store: RunStore, ledger: Ledger) -> ReActLoop:
    def reply(request: ModelRequest) -> ModelResponse:
        return _react_reply(REACT_TURNS[request.messages[0].text], request, ledger)

    return ReActLoop(FunctionModel(reply), _tools(ledger), system=REACT_SYSTEM, store=store)


REWOO_PLANNER = "You are the replay corpus's ReWOO planner."
REWOO_SOLVER = "You are the replay corpus's ReWOO solver."
REWOO_PLANS = {
    "Is Paris or Rome warmer, and what should I wear in Atlantis?": {
        "steps": [
            {"step_id": "#E1", "description": "Paris", "tool_name": "weather",
             "tool_args": {"city": "Paris"}},
            {"step_id": "#E2", "description": "Atlantis", "tool_name": "weather",
             "tool_args": {"city": "Atlantis"}},
            {"step_id": "#E3", "description": "Rome", "tool_name": "weather",
             "tool_args": {"city": "Rome"}},
            {"step_id": "#E4", "description": "which is warmer", "tool_name": "warmer",
             "tool_args": {"a": "#E1", "b": "#E3"}},
            {"step_id": "#E5", "description": "what to wear in Atlantis",
             "tool_name": "advice", "tool_args": {"report": "#E2"}},
        ]
    },
}  # fmt: skip
REWOO_ANSWER = "Rome is warmer; Atlantis has no weather report, so no advice."


def rewoo(store: RunStore, ledger: Ledger) -> ReWOOPipeline:
    def reply(request: ModelRequest) -> ModelResponse:
        if request.output is not None:
            ledger.model_asked("plan")
            task = next(t for t in REWOO_PLANS if t in request.messages[0].text)
            return respond_structured(REWOO_PLANS[task], usage=USAGE)
        ledger.model_asked("solve")
        return respond(REWOO_ANSWER, usage=USAGE)

    return ReWOOPipeline(
        FunctionModel(reply),
        _tools(ledger),
        planner_system=REWOO_PLANNER,
        solver_system=REWOO_SOLVER,
        store=store,
    )


PE_PLANNER = "You are the replay corpus's planner."
PE_EXECUTOR = "You are the replay corpus's step executor."
PE_REPORTER = "You are the replay corpus's reporter."
PE_STEPS: dict[str, list[tuple[str, list[Turn]]]] = {
    "Compare the weather in Paris and Rome.": [
        (
            "Get the weather in Paris",
            [
                Turn("1:c1", (ToolCall("c1", "weather", {"city": "Paris"}),)),
                Turn("1:answer", answer=WEATHER["Paris"]),
            ],
        ),
        (
            "Get the weather in Rome",
            [
                Turn("2:c1", (ToolCall("c1", "weather", {"city": "Rome"}),)),
                Turn("2:answer", answer=WEATHER["Rome"]),
            ],
        ),
    ],
    "Settle invoice INV-7.": [
        (
            "Look up invoice INV-7",
            [
                Turn("1:c1", (ToolCall("c1", "lookup_invoice", {"invoice": "INV-7"}),)),
                Turn("1:answer", answer=INVOICES["INV-7"]),
            ],
        ),
        (
            "Pay invoice INV-7",
            [
                Turn("2:c1", (ToolCall("c1", "pay", {"invoice": "INV-7", "amount": 120}),)),
                Turn("2:answer", answer="Paid 120 EUR to ACME."),
            ],
        ),
    ],
}
PE_REPORTS = {
    "Compare the weather in Paris and Rome.": "Rome (24C) is warmer than Paris (18C).",
    "Settle invoice INV-7.": "INV-7 is paid: 120 EUR to ACME.",
}


def _step_of(task: str, prompt: str) -> list[Turn]:
    """The turns of the step a step prompt is about: of the plan's step descriptions, the
    one it names first (it lists earlier steps' findings after its own). No description
    may be part of the task, which the prompt names before either."""
    assert not [d for d, _ in PE_STEPS[task] if d in task], "a step is named in the task"
    found = [(prompt.find(d), turns) for d, turns in PE_STEPS[task] if d in prompt]
    if not found:
        raise AssertionError(f"no step of {task!r} in the prompt {prompt!r}")
    return min(found, key=lambda item: item[0])[1]


def plan_execute(store: RunStore, ledger: Ledger) -> PlanAndExecute:
    def reply(request: ModelRequest) -> ModelResponse:
        prompt = request.messages[0].text
        task = next(t for t in PE_STEPS if t in prompt)
        if request.system == PE_EXECUTOR:
            return _react_reply(_step_of(task, prompt), request, ledger)
        if request.output is not None:
            ledger.model_asked("plan")
            steps = [
                {"step_number": n, "description": d}
                for n, (d, _) in enumerate(PE_STEPS[task], start=1)
            ]
            return respond_structured({"steps": steps}, usage=USAGE)
        ledger.model_asked("report")
        return respond(PE_REPORTS[task], usage=USAGE)

    return PlanAndExecute(
        FunctionModel(reply),
        _tools(ledger),
        planner_system=PE_PLANNER,
        executor_system=PE_EXECUTOR,
        reporter_system=PE_REPORTER,
        store=store,
    )


LOOPS: dict[str, Callable[[RunStore, Ledger], Any]] = {
    "react": react,
    "rewoo": rewoo,
    "plan_execute": plan_execute,
}
"""Each loop's builder, by the kind its runs are journaled as."""
