"""Partial output while streaming: `OutputDelta` events carry a typed answer as it is written,
from the text or from the final-answer tool's arguments, on all three loops and under
`stream` and `astream`; the last one is the accepted output, equal to `result.output`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest

from agentloops import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    OutputDelta,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    RunFinished,
    ToolCall,
    tool,
)
from agentloops.testing import ScriptedModel, respond_structured, use_tools


class Report(pydantic.BaseModel):
    title: str
    points: list[str]


REPORT = {"title": "Rome is warmer", "points": ["Rome 24C", "Oslo 9C", "a long point " * 4]}


@tool
def weather(city: str) -> str:
    """The weather now in a city."""
    return {"Rome": "24C", "Oslo": "9C"}.get(city, "?")


PLAN = {
    "steps": [
        {
            "step_id": "#E1",
            "description": "Rome",
            "tool_name": "weather",
            "tool_args": {"city": "Rome"},
        },
    ]
}


def loops() -> dict[str, Any]:
    return {
        "react": lambda answer: ReActLoop(
            ScriptedModel([use_tools(("weather", {"city": "Rome"})), answer]),
            [weather],
            output_type=Report,
        ),
        "rewoo": lambda answer: ReWOOPipeline(
            ScriptedModel([respond_structured(PLAN), answer]), [weather], output_type=Report
        ),
        "plan_execute": lambda answer: PlanAndExecute(
            ScriptedModel(
                [
                    respond_structured({"steps": [{"step_number": 1, "description": "Rome"}]}),
                    use_tools(("weather", {"city": "Rome"})),
                    "24C in Rome",
                    answer,
                ]
            ),
            [weather],
            output_type=Report,
        ),
    }


def collect(items: Iterator[Any] | list[Any]) -> tuple[list[Event], Any]:
    *events, result = list(items)
    return events, result


async def acollect(loop: Any, task: str) -> tuple[list[Event], Any]:
    return collect([item async for item in loop.astream(task)])


ANSWERS = {
    "text": lambda: respond_structured(REPORT),
    "tool": lambda: use_tools(ToolCall("final_1", "final_answer", REPORT)),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
@pytest.mark.parametrize("name", list(loops()))
@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_output_deltas_grow_and_the_last_equals_the_output(name: str, answer: str, driver: str):
    loop = loops()[name](ANSWERS[answer]())
    if driver == "stream":
        events, result = collect(loop.stream("Which is warmer?"))
    else:
        events, result = asyncio.run(acollect(loop, "Which is warmer?"))
    assert result.output == Report(**REPORT)
    deltas = [e for e in events if isinstance(e, OutputDelta)]
    *partial, last = deltas
    assert last.final and last.output == result.output and last.data == REPORT
    assert partial and not any(d.final for d in partial)
    assert partial[-1].data == REPORT  # the whole answer, once parsed to the end
    titles = [d.data.get("title", "") for d in partial]
    assert any(0 < len(t) < len(REPORT["title"]) for t in titles)  # cut where it had got to
    assert all(REPORT["title"].startswith(t) for t in titles)
    assert all(d.loop == name and d.run_id == result.run_id for d in deltas)
    # the partial deltas come inside the answer's model call, the last one after it
    answer_call = max(i for i, e in enumerate(events) if isinstance(e, ModelCallStarted))
    finished = max(i for i, e in enumerate(events) if isinstance(e, ModelCallFinished))
    first = events.index(partial[0])
    assert answer_call < first < finished < events.index(last)
    assert isinstance(events[-1], RunFinished) and events[-2] is last  # the run's own, last


def test_only_the_final_answer_streams_as_output_not_the_plan():
    loop = ReWOOPipeline(
        ScriptedModel([respond_structured(PLAN), respond_structured(REPORT)]),
        [weather],
        output_type=Report,
    )
    events, _ = collect(loop.stream("q"))
    first_delta = next(i for i, e in enumerate(events) if isinstance(e, OutputDelta))
    planner_done = next(i for i, e in enumerate(events) if isinstance(e, ModelCallFinished))
    assert first_delta > planner_done


def test_a_rejected_answer_streams_and_then_the_next_one_does():
    bad = {"title": "no points"}
    loop = ReActLoop(
        ScriptedModel([respond_structured(bad), respond_structured(REPORT)]), [], output_type=Report
    )
    events, result = collect(loop.stream("q"))
    deltas = [e for e in events if isinstance(e, OutputDelta)]
    assert [d for d in deltas if d.final] == [deltas[-1]]
    assert {"title": "no points"} in [d.data for d in deltas]  # the first attempt streamed too
    assert deltas[-1].output == result.output


def test_a_wrapped_output_streams_the_inner_value():
    loop = ReActLoop(
        ScriptedModel([respond_structured({"result": ["alpha", "beta", "gamma"]})]),
        [],
        output_type=list[str],
    )
    events, result = collect(loop.stream("q"))
    deltas = [e for e in events if isinstance(e, OutputDelta)]
    assert all(isinstance(d.data, list) for d in deltas)
    assert deltas[-1].output == result.output == ["alpha", "beta", "gamma"]


def test_an_untyped_run_streams_no_output_deltas():
    loop = ReActLoop(ScriptedModel([respond_structured(REPORT)]), [])
    events, _ = collect(loop.stream("q"))
    assert not any(isinstance(e, OutputDelta) for e in events)


def test_a_sink_gets_the_accepted_output_without_streaming():
    sunk: list[Event] = []
    loop = ReActLoop(
        ScriptedModel([respond_structured(REPORT)]), [], output_type=Report, on_event=sunk.append
    )
    result = loop.run("q")
    deltas = [e for e in sunk if isinstance(e, OutputDelta)]
    assert len(deltas) == 1 and deltas[0].final and deltas[0].output == result.output
