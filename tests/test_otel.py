"""OTelSink: run events become GenAI spans, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import threading
from typing import Any

import pydantic
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentloops import (
    ApprovalRequested,
    ModelCallFinished,
    ModelCallStarted,
    ModelError,
    PlanMade,
    ReActLoop,
    Replanned,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCall,
    Usage,
    ask_structured,
    tool,
)
from agentloops.otel import OTelSink
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools

CANARY = "sk-live-CANARY-42"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def sink(exporter: InMemorySpanExporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with OTelSink(provider.get_tracer("test"), provider_name="anthropic") as s:
        yield s


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = spans(exporter, name)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "missing":
        raise KeyError(key)
    return f"value of {key}"


def test_a_react_run_is_a_span_with_a_child_per_model_call_and_tool_call(sink, exporter):
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=20)
    model = ScriptedModel(
        [
            use_tools(("lookup", {"key": "a"}), ("lookup", {"key": "missing"}), usage=usage),
            respond("done", usage=Usage(input_tokens=1, output_tokens=2)),
        ]
    )
    result = ReActLoop(model, [lookup], on_event=sink).run("go", run_id="r1")

    run = one(exporter, "invoke_agent react")
    assert run.parent is None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["agentloops.run.id"] == "r1"
    assert run.attributes["agentloops.stop_reason"] == "answered"
    assert run.attributes["gen_ai.usage.input_tokens"] == 131  # cached input included
    assert run.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert run.status.status_code == StatusCode.UNSET

    chats = spans(exporter, "chat scripted")
    assert len(chats) == result.model_calls == 2
    first = chats[0].attributes
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.response.model"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (130, 5)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 100
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 20

    tools = spans(exporter, "execute_tool lookup")
    assert len(tools) == 2
    by_id = {s.attributes["gen_ai.tool.call.id"]: s for s in tools}
    ok, failed = (by_id[c.id] for c in result.messages[1].tool_calls)
    assert ok.status.status_code == StatusCode.UNSET
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "tool_error"
    assert all(s.attributes["gen_ai.tool.name"] == "lookup" for s in tools)
    assert {parent_of(s) for s in [*chats, *tools]} == {run.context.span_id}
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {run.context.trace_id}


def test_a_run_that_stops_short_is_an_error_span(sink, exporter):
    model = ScriptedModel([use_tools(("lookup", {"key": str(i)})) for i in range(2)])
    ReActLoop(model, [lookup], max_steps=2, on_event=sink).run("loop")
    run = one(exporter, "invoke_agent react")
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["error.type"] == "max_steps"


def test_nested_runs_hang_under_their_parent(sink, exporter):
    sink(RunStarted(loop="plan_execute", run_id="outer"))
    sink(StepStarted(loop="plan_execute", run_id="outer", step_id="1", description="search"))
    sink(RunStarted(loop="react", run_id="inner", parent_run_id="outer"))
    sink(
        RunFinished(
            loop="react",
            run_id="inner",
            stop_reason="answered",
            usage=Usage(),
            model_calls=1,
            seconds=0.1,
        )
    )
    sink(StepFinished(loop="plan_execute", run_id="outer", step_id="1", ok=False, seconds=0.1))
    sink(
        RunFinished(
            loop="plan_execute",
            run_id="outer",
            stop_reason="answered",
            usage=Usage(),
            model_calls=3,
            seconds=0.2,
        )
    )

    outer = one(exporter, "invoke_agent plan_execute")
    inner = one(exporter, "invoke_agent react")
    step = one(exporter, "step 1")
    assert parent_of(inner) == parent_of(step) == outer.context.span_id
    assert inner.attributes["agentloops.run.parent_id"] == "outer"
    assert step.status.status_code == StatusCode.ERROR


def test_plans_replans_and_approvals_are_events_on_the_run_span(sink, exporter):
    sink(RunStarted(loop="rewoo", run_id="r"))
    sink(PlanMade(loop="rewoo", run_id="r", plan={"steps": []}))
    sink(Replanned(loop="rewoo", run_id="r", attempt=1, problems=[f"arg {CANARY} is bad"]))
    call = ToolCall("c1", "publish", {"token": CANARY})
    sink(ApprovalRequested(loop="rewoo", run_id="r", calls=[call]))
    sink(PlanMade(loop="rewoo", run_id="unknown", plan=None))  # no span: ignored
    sink(
        RunFinished(
            loop="rewoo",
            run_id="r",
            stop_reason="approval_required",
            usage=Usage(),
            model_calls=1,
            seconds=0.0,
        )
    )

    run = one(exporter, "invoke_agent rewoo")
    assert [(e.name, dict(e.attributes or {})) for e in run.events] == [
        ("plan_made", {}),
        ("replanned", {"attempt": 1, "problems": 1}),
        ("approval_requested", {"gen_ai.tool.names": ("publish",)}),
    ]
    assert run.status.status_code == StatusCode.UNSET  # a pause is not a failure


def test_no_argument_output_or_secret_reaches_a_span(sink, exporter):
    @tool
    def login(password: str) -> str:
        """Log in."""
        return f"token for {password}"

    model = ScriptedModel([use_tools(("login", {"password": CANARY})), respond(f"ok {CANARY}")])
    ReActLoop(model, [login], system=CANARY, on_event=sink).run(f"use {CANARY}")
    dumped = json.dumps([json.loads(s.to_json()) for s in exporter.get_finished_spans()])
    assert "login" in dumped
    assert CANARY not in dumped


def test_a_run_that_raised_ends_as_an_error_span(sink, exporter):
    with pytest.raises(ModelError):
        ReActLoop(ScriptedModel([ModelError("down")]), [], on_event=sink).run("x")
    run, chat = one(exporter, "invoke_agent react"), one(exporter, "chat")
    assert run.attributes["error.type"] == "error"
    assert chat.attributes["error.type"] == "unfinished"


@pytest.mark.parametrize("stop_reason", ["tool_failed", "invalid_plan", "max_steps"])
def test_any_stop_but_an_answer_or_a_pause_is_an_error_span(sink, exporter, stop_reason):
    sink(RunStarted(loop="rewoo", run_id="r"))
    sink(
        RunFinished(
            loop="rewoo",
            run_id="r",
            stop_reason=stop_reason,
            usage=Usage(),
            model_calls=1,
            seconds=0,
        )
    )
    span = one(exporter, "invoke_agent rewoo")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == stop_reason


def test_spans_left_open_are_ended_by_close(exporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OTelSink(provider.get_tracer("test"))
    sink(RunStarted(loop="react", run_id="r"))  # a run whose process never reported its end
    sink(ModelCallStarted(loop="react", run_id="r", step=0, messages=1))
    assert exporter.get_finished_spans() == ()
    sink.close()
    run, chat = one(exporter, "invoke_agent react"), one(exporter, "chat")
    assert run.attributes["error.type"] == chat.attributes["error.type"] == "unfinished"
    assert "gen_ai.provider.name" not in chat.attributes


def test_a_call_started_again_before_finishing_ends_the_stale_span(sink, exporter):
    sink(ModelCallStarted(loop="router", run_id="", step=0, messages=1))
    sink(ModelCallStarted(loop="router", run_id="", step=0, messages=1))
    sink(
        ModelCallFinished(
            loop="router",
            run_id="",
            step=0,
            stop_reason="end_turn",
            usage=Usage(),
            model="",
            seconds=0.0,
        )
    )
    stale, fresh = spans(exporter, "chat")
    assert stale.status.status_code == StatusCode.ERROR
    assert fresh.status.status_code == StatusCode.UNSET
    assert fresh.parent is None  # no run span for run_id "": a root span


class Verdict(pydantic.BaseModel):
    ok: bool


def test_structured_calls_outside_a_run_are_root_chat_spans(sink, exporter):
    model = ScriptedModel([respond("nope"), respond_structured({"ok": True})])
    ask_structured(model, Verdict, "ok?", on_event=sink, run_id="s1")
    assert len(spans(exporter, "chat scripted")) == 2


def test_events_from_many_threads_make_well_formed_spans(sink, exporter):
    def one_run(n: int) -> None:
        model = ScriptedModel(
            [use_tools(*[("lookup", {"key": f"{n}-{i}"}) for i in range(4)]), respond("ok")]
        )
        ReActLoop(model, [lookup], on_event=sink).run("go", run_id=f"run-{n}")

    threads = [threading.Thread(target=one_run, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    runs = {s.attributes["agentloops.run.id"]: s for s in spans(exporter, "invoke_agent react")}
    tools = spans(exporter, "execute_tool lookup")
    assert len(runs) == 8 and len(tools) == 32
    by_parent: dict[Any, int] = {}
    for span in tools:
        by_parent[parent_of(span)] = by_parent.get(parent_of(span), 0) + 1
    assert by_parent == {r.context.span_id: 4 for r in runs.values()}


def test_a_run_finishing_ends_its_open_calls_and_stray_finishes_are_ignored(sink, exporter):
    usage = Usage()
    sink(RunStarted(loop="react", run_id="r"))
    sink(ModelCallStarted(loop="react", run_id="r", step=0, messages=1))
    sink(
        RunFinished(
            loop="react", run_id="r", stop_reason="error", usage=usage, model_calls=0, seconds=0
        )
    )
    sink(
        RunFinished(
            loop="react", run_id="r", stop_reason="error", usage=usage, model_calls=0, seconds=0
        )
    )
    sink(
        ModelCallFinished(
            loop="react",
            run_id="r",
            step=5,
            stop_reason="end_turn",
            usage=usage,
            model="m",
            seconds=0,
        )
    )
    run, chat = one(exporter, "invoke_agent react"), one(exporter, "chat")
    assert chat.attributes["error.type"] == "unfinished"
    assert run.attributes["error.type"] == "error"


def test_plan_and_execute_steps_hang_under_the_run_span(sink, exporter):
    from agentloops import PlanAndExecute

    plan = {"steps": [{"step_number": 1, "description": "Look up a", "tool_hint": "lookup"}]}
    planner = ScriptedModel([respond_structured(plan), respond("report")])
    executor = ScriptedModel([use_tools(("lookup", {"key": "a"})), respond("found a")])
    PlanAndExecute(planner, [lookup], executor=executor, reporter=planner, on_event=sink).run(
        "task", run_id="pe"
    )
    outer = one(exporter, "invoke_agent plan_execute")
    step = one(exporter, "invoke_agent react")
    assert step.parent is not None and step.parent.span_id == outer.context.span_id
    assert parent_of(one(exporter, "execute_tool lookup")) == step.context.span_id


def test_without_opentelemetry_the_error_names_the_extra():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "try:\n    import agentloops.otel\n"
        "except ModuleNotFoundError as exc:\n    print(exc.name, '|', exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith("opentelemetry | agentloops.otel needs OpenTelemetry")
    assert "pip install 'agentloops-kit[otel]'" in out.stdout


def test_a_chat_span_carries_its_cost_and_the_models_that_failed_before(sink, exporter):
    from decimal import Decimal

    from agentloops import FallbackModel, ModelError, Price

    down = ScriptedModel([ModelError("Overloaded", status=529)])
    down.model = "claude-opus-4-8"  # type: ignore[attr-defined]
    chain = FallbackModel([down, ScriptedModel([respond("ok", usage=Usage(input_tokens=3))])])
    price = Price(input=1_000_000, output=0)
    ReActLoop(chain, [], price=price, on_event=sink).run("go")
    chat = one(exporter, "chat scripted").attributes
    assert Decimal(chat["agentloops.cost"]) == 3
    assert chat["agentloops.fallback.failed"] == ("claude-opus-4-8",)
    assert chat["agentloops.fallback.kinds"] == ("overloaded",)


@pytest.mark.parametrize("kind", ["react", "rewoo", "pe"])
def test_a_sub_agents_run_hangs_under_the_tool_span_of_the_call_that_made_it(sink, exporter, kind):
    from _subagents import parent_loop, sub_loop

    agent = sub_loop(kind).as_tool("sub", "Adds numbers.")
    parent_loop("react", agent, on_event=sink).run("Add 2 and 3.", run_id="top")
    runs = spans(exporter, "invoke_agent react")
    top = next(s for s in runs if s.attributes["agentloops.run.id"] == "top")
    call = one(exporter, "execute_tool sub")
    assert call.parent.span_id == top.context.span_id
    loop = {"react": "react", "rewoo": "rewoo", "pe": "plan_execute"}[kind]
    below = next(
        s
        for s in spans(exporter, f"invoke_agent {loop}")
        if s.attributes["agentloops.run.id"] == "top:outer_1"
    )
    assert below.parent.span_id == call.context.span_id
    assert below.attributes["agentloops.run.parent_id"] == "top"
    assert below.attributes["gen_ai.tool.call.id"] == "outer_1"
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 2 + {"react": 2, "rewoo": 2, "pe": 4}[kind]
    assert call.end_time >= below.end_time
