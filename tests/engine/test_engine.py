"""The step machines, driven by hand: no model, no tools, no driver.

Each loop's decisions live in a machine that yields effects and receives outcomes. These
tests write the outcomes themselves, and check that a machine fed the outcomes of an
earlier run makes exactly the same requests and returns the same result (what the
durable journal relies on to replay a run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Generator
from typing import Any

import pytest

from agentloops import (
    Evaluator,
    ModelError,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    Router,
    RunStore,
    ToolCall,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from agentloops.engine.effects import CallModel, Decide, Effect, Emit, NextTool, StartTool
from agentloops.events import RunFinished, RunStarted, ToolCallStarted, event_to_dict
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools

NOBODY = ScriptedModel([])  # the machines never call it: the tests answer for it


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def finish(machine: Generator[Effect, Any, Any], outcome: Any) -> Any:
    """Send the last outcome; the machine must return."""
    with pytest.raises(StopIteration) as done:
        machine.send(outcome)
    return done.value.value


def test_a_react_machine_by_hand() -> None:
    machine = ReActLoop(NOBODY, [add]).machine("2 + 3?", run_id="r1")
    effect = next(machine)
    assert isinstance(effect, CallModel) and effect.request.messages[0].text == "2 + 3?"
    assert [t.name for t in effect.request.tools] == ["add"]
    call = ToolCall("c1", "add", {"a": 2, "b": 3})
    effect = machine.send(use_tools(call))
    assert isinstance(effect, StartTool) and effect.call == call and effect.run_id == "r1"
    assert isinstance(machine.send(None), NextTool)
    effect = machine.send(("c1", ToolOutcome(content="5")))  # the test is the tool
    assert isinstance(effect, CallModel)
    assert effect.request.messages[-1].tool_results[0].content == "5"
    result = finish(machine, respond("5"))
    assert (result.answer, result.stop_reason, result.tool_calls, result.run_id) == (
        "5",
        "answered",
        1,
        "r1",
    )


def test_parallel_calls_are_put_back_in_the_order_asked_whatever_order_they_finish() -> None:
    machine = ReActLoop(NOBODY, [add]).machine("sums", run_id="r1")
    next(machine)
    calls = [ToolCall(f"c{i}", "add", {"a": i, "b": i}) for i in range(3)]
    started = [machine.send(use_tools(*calls))]
    while not isinstance(started[-1], NextTool):
        started.append(machine.send(None))
    assert [e.call.id for e in started[:-1]] == ["c0", "c1", "c2"]
    for call_id in ("c2", "c0"):
        assert isinstance(machine.send((call_id, ToolOutcome(content=call_id))), NextTool)
    effect = machine.send(("c1", ToolOutcome(content="c1")))
    assert [r.content for r in effect.request.messages[-1].tool_results] == ["c0", "c1", "c2"]


def test_a_machine_emits_only_when_observed() -> None:
    quiet = ReActLoop(NOBODY, []).machine("hi", run_id="r1")
    assert isinstance(next(quiet), CallModel)
    loud = ReActLoop(NOBODY, []).machine("hi", run_id="r1", observed=True)
    first = next(loud)
    assert isinstance(first, Emit) and isinstance(first.event, RunStarted)
    assert isinstance(loud.send(None), CallModel)
    last = loud.send(respond("hello"))
    assert isinstance(last, Emit) and isinstance(last.event, RunFinished)
    assert last.event.stop_reason == "answered"
    assert finish(loud, None).answer == "hello"


def test_a_failure_thrown_into_the_machine_carries_the_partial_result() -> None:
    machine = ReActLoop(NOBODY, [add]).machine("q", run_id="r1")
    next(machine)
    machine.send(use_tools(ToolCall("c1", "add", {"a": 1, "b": 1})))
    machine.send(None)
    assert isinstance(machine.send(("c1", ToolOutcome(content="2"))), CallModel)
    with pytest.raises(ModelError) as info:
        machine.throw(ModelError("provider down"))
    assert info.value.result.stop_reason == "error" and info.value.result.tool_calls == 1


def test_decisions_at_hand_run_the_approved_call_without_pausing() -> None:
    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send."""
        return f"sent to {to}"

    machine = ReActLoop(NOBODY, [send]).machine("mail ann", run_id="r1")
    next(machine)
    call = ToolCall("c1", "send", {"to": "ann"})
    effect = machine.send(use_tools(call))
    assert isinstance(effect, Decide) and effect.calls == [call]
    assert isinstance(machine.send({"c1": True}), StartTool)  # a durable driver's answer
    assert isinstance(machine.send(None), NextTool)
    effect = machine.send(("c1", ToolOutcome(content="sent to ann")))
    assert effect.request.messages[-1].tool_results[0].content == "sent to ann"
    assert finish(machine, respond("done")).stop_reason == "answered"


def test_no_decisions_at_hand_pause_the_run() -> None:
    @tool(requires_approval=True)
    def send(to: str) -> str:
        """Send."""
        return f"sent to {to}"

    machine = ReActLoop(NOBODY, [send]).machine("mail ann", run_id="r1")
    next(machine)
    assert isinstance(machine.send(use_tools(("send", {"to": "ann"}))), Decide)
    result = finish(machine, None)
    assert result.stop_reason == "approval_required" and result.tool_calls == 0


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "add", "tool_args": {"a": 1, "b": 2}},
        {"step_id": "#E2", "description": "b", "tool_name": "add", "tool_args": {"a": 3, "b": 4}},
        {
            "step_id": "#E3",
            "description": "sum",
            "tool_name": "add",
            "tool_args": {"a": "#E1", "b": "#E2"},
            "depends_on": ["#E1", "#E2"],
        },
    ]
}


def test_a_rewoo_machine_by_hand() -> None:
    machine = ReWOOPipeline(NOBODY, [add]).machine("sum it", run_id="w1")
    planner = next(machine)
    assert isinstance(planner, CallModel) and planner.request.output is not None
    first = machine.send(respond_structured(PLAN))
    second = machine.send(None)
    assert [first.call.id, second.call.id] == ["#E1", "#E2"]  # both roots at once
    assert isinstance(machine.send(None), NextTool)
    assert isinstance(machine.send(("#E2", ToolOutcome(content="7"))), NextTool)
    third = machine.send(("#E1", ToolOutcome(content="3")))
    assert isinstance(third, StartTool) and third.call.args == {"a": "3", "b": "7"}
    assert isinstance(machine.send(None), NextTool)
    solver = machine.send(("#E3", ToolOutcome(content="10")))
    assert isinstance(solver, CallModel) and "#E3" in solver.request.messages[0].text
    result = finish(machine, respond("10"))
    assert result.answer == "10" and list(result.evidence) == ["#E1", "#E2", "#E3"]


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a machine touched the store")


_METHODS = [n for n, v in vars(RunStore).items() if n[0] != "_" and callable(v)]
Untouchable = type("Untouchable", (), dict.fromkeys(_METHODS, _refuse))
"""A run store (it has every method of the protocol) that no method may be called on."""


def test_a_plan_and_execute_machine_by_hand() -> None:
    pe = PlanAndExecute(NOBODY, [add], store=Untouchable())  # built and driven: never read
    machine = pe.machine("add things", run_id="p1")
    planner = next(machine)  # nothing to save first: a durable run is journaled around it
    assert isinstance(planner, CallModel) and planner.request.output is not None
    plan = {"steps": [{"step_number": 1, "description": "add 2 and 3", "tool_hint": "add"}]}
    step = machine.send(respond_structured(plan))
    assert isinstance(step, CallModel) and "add 2 and 3" in step.request.messages[0].text
    start = machine.send(use_tools(ToolCall("c1", "add", {"a": 2, "b": 3})))
    assert isinstance(start, StartTool) and start.run_id == "p1.1"
    machine.send(None)
    machine.send(("c1", ToolOutcome(content="5")))
    reporter = machine.send(respond("The sum is 5."))
    assert isinstance(reporter, CallModel) and "The sum is 5." in reporter.request.messages[0].text
    result = finish(machine, respond("5"))
    assert result.answer == "5" and result.step_status == ["done"]


def test_router_and_evaluator_machines_by_hand() -> None:
    router = Router(NOBODY, {"a": "first", "b": "second"}, default="a").machine("pick")
    assert isinstance(next(router), CallModel)
    assert finish(router, respond_structured({"route": "b", "reasoning": "x"})).route == "b"
    judge = Evaluator(NOBODY).machine("task", "draft", ["evidence"])
    assert isinstance(next(judge), CallModel)
    verdict = finish(judge, respond_structured({"verdict": "pass", "reasons": ["ok"]}))
    assert verdict.passed


# -- replay: the same outcomes give the same run ---------------------------------------------


def perform(registry: ToolRegistry) -> Callable[[Effect], Any]:
    """A minimal driver: calls the model and the tools for real, one at a time."""
    started: list[ToolCall] = []

    def outcome(effect: Effect) -> Any:
        if isinstance(effect, CallModel):
            return effect.client.complete(effect.request)
        if isinstance(effect, StartTool):
            started.append(effect.call)
        elif isinstance(effect, NextTool):
            call = started.pop(0)
            return call.id, registry.call(call.name, call.args)
        return None

    return outcome


def record(machine: Generator[Effect, Any, Any], answer: Callable[[Effect], Any]) -> Any:
    """Drive `machine` with `answer`; the effects it asked for, the outcomes, the result."""
    effects: list[Effect] = []
    outcomes: list[Any] = []
    outcome: Any = None
    try:
        while True:
            effect = machine.send(outcome)
            outcome = answer(effect)
            effects.append(effect)
            outcomes.append(outcome)
    except StopIteration as done:
        return effects, outcomes, done.value


def replayed(outcomes: list[Any]) -> Callable[[Effect], Any]:
    queue = list(outcomes)
    return lambda effect: queue.pop(0)


def comparable(effect: Effect) -> Any:
    if isinstance(effect, CallModel):
        return ("model", effect.request.system, effect.request.messages, effect.step)
    if isinstance(effect, StartTool):
        return ("start", effect.call)
    if isinstance(effect, Emit):
        fields = event_to_dict(effect.event)
        return {k: v for k, v in fields.items() if k not in ("at", "ts", "seconds")}
    return type(effect).__name__


def react_run(model: ScriptedModel) -> Generator[Effect, Any, Any]:
    return ReActLoop(model, [add]).machine("sums", run_id="r1", observed=True)


def rewoo_run(model: ScriptedModel) -> Generator[Effect, Any, Any]:
    return ReWOOPipeline(model, [add]).machine("sum", run_id="w1", observed=True)


def plan_execute_run(model: ScriptedModel) -> Generator[Effect, Any, Any]:
    return PlanAndExecute(model, [add]).machine("sum", run_id="p1", observed=True)


SCRIPTS: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "react": (
        react_run,
        [use_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), respond("3 and 7")],
    ),
    "rewoo": (rewoo_run, [respond_structured(PLAN), respond("10")]),
    "plan_execute": (
        plan_execute_run,
        [
            respond_structured({"steps": [{"step_number": 1, "description": "add 1 and 2"}]}),
            use_tools(("add", {"a": 1, "b": 2})),
            respond("3"),
            respond("The sum is 3."),
        ],
    ),
}


@pytest.mark.parametrize("loop", SCRIPTS)
def test_replaying_the_outcomes_of_a_run_repeats_it_exactly(loop: str) -> None:
    make, script = SCRIPTS[loop]
    registry = ToolRegistry([add])
    effects, outcomes, result = record(make(ScriptedModel(script)), perform(registry))
    again, _, replay = record(make(ScriptedModel([])), replayed(outcomes))
    assert [comparable(e) for e in again] == [comparable(e) for e in effects]
    assert replay.answer == result.answer and replay.usage == result.usage
    assert any(isinstance(e, StartTool) for e in effects)
    # no ToolCallStarted among the machine's own events: the driver makes those
    assert not any(isinstance(e, Emit) and isinstance(e.event, ToolCallStarted) for e in effects)


FORKED = """
import os, signal
from agentloops import ReActLoop, ToolCall, tool
from agentloops.testing import ScriptedModel, use_tools

@tool
def echo(x: int) -> str:
    '''Echo.'''
    return str(x)

def run():
    turn = use_tools(ToolCall("1", "echo", {"x": 1}), ToolCall("2", "echo", {"x": 2}))
    return ReActLoop(ScriptedModel([turn, "done"]), [echo]).run("q").answer

run()  # parallel calls: this process now has an idle tool thread
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a hang ends here, as a signal
    run()
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_parallel_tool_calls_work_in_a_process_forked_after_some_ran() -> None:
    # The parent's idle tool threads do not exist in a forked child: had the child counted
    # on them, its first parallel turn would wait forever.
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "0", (done.stdout, done.stderr)
