"""`stream` and `astream` on the three loops: every event, the deltas, the result last, the
order guarantees, and stopping early."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from agentloops import (
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelError,
    ModelRequest,
    ModelResponse,
    PlanAndExecute,
    PlanExecuteResult,
    ReActLoop,
    ReActResult,
    ReWOOPipeline,
    ReWOOResult,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools

RAN: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append(key)
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


def react_script() -> list[Any]:
    return [use_tools(("lookup", {"key": "alpha"}), text="Let me look."), respond("Alpha is 1.")]


def test_react_stream_yields_every_event_the_deltas_and_the_result_last() -> None:
    sunk: list[Event] = []
    items = list(
        ReActLoop(ScriptedModel(react_script()), [lookup], on_event=sunk.append).stream("q")
    )
    *events, result = items
    assert isinstance(result, ReActResult) and result.answer == "Alpha is 1."
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    assert sunk == events  # on_event hears the same events
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me look.Alpha is 1."
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert fragments[0].name == "lookup" and fragments[0].call_id
    args = "".join(e.arguments for e in fragments)
    assert json.loads(args) == {"key": "alpha"}
    assert {e.run_id for e in events} == {result.run_id} and {e.loop for e in events} == {"react"}
    assert_order(events)


def assert_order(events: list[Event]) -> None:
    """The documented guarantees: deltas inside their model call; a tool call's start before
    its finish; `RunFinished` last."""
    open_call = False
    started: set[str] = set()
    for e in events:
        if isinstance(e, ModelCallStarted):
            assert not open_call
            open_call = True
        elif isinstance(e, ModelCallFinished):
            open_call = False
        elif isinstance(e, TextDelta | ToolCallDelta):
            assert open_call, f"{e} outside its model call"
        elif isinstance(e, ToolCallStarted):
            started.add(e.call_id)
        elif isinstance(e, ToolCallFinished):
            assert e.call_id in started
    assert isinstance(events[-1], RunFinished)


@pytest.mark.anyio
async def test_react_astream_matches_stream() -> None:
    items = [e async for e in ReActLoop(ScriptedModel(react_script()), [lookup]).astream("q")]
    *events, result = items
    assert isinstance(result, ReActResult) and result.answer == "Alpha is 1."
    kinds = [type(e).__name__ for e in events]
    sync_kinds = [
        type(e).__name__
        for e in ReActLoop(ScriptedModel(react_script()), [lookup]).stream("q")
        if not isinstance(e, ReActResult)
    ]
    assert kinds == sync_kinds
    assert_order(events)


def test_stopping_a_stream_early_ends_the_run() -> None:
    model = ScriptedModel(react_script())
    stream = ReActLoop(model, [lookup]).stream("q")
    for item in stream:
        if isinstance(item, TextDelta):
            break
    assert isinstance(stream, Iterator)
    stream.close()  # type: ignore[attr-defined]
    assert RAN == [] and model.calls == 1  # no tool ran, no second model call


@pytest.mark.anyio
async def test_stopping_an_astream_early_ends_the_run() -> None:
    model = ScriptedModel(react_script())
    stream = ReActLoop(model, [lookup]).astream("q")
    assert isinstance(stream, AsyncIterator)
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        async for item in stream:
            if isinstance(item, ToolCallDelta):
                break
    assert RAN == [] and model.calls == 1


class Cut:
    """A streaming client whose stream breaks off inside a tool call."""

    def complete(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover
        raise AssertionError("streaming only")

    def stream(self, request: ModelRequest) -> Iterator[Any]:
        yield ToolCallDelta(index=0, call_id="c1", name="lookup")
        yield ToolCallDelta(index=0, arguments='{"key": "al')
        raise ModelError("the stream ended before the reply was complete")


def test_a_stream_cut_off_half_way_raises_and_runs_nothing() -> None:
    seen: list[Any] = []
    with pytest.raises(ModelError, match="before the reply was complete") as info:
        for item in ReActLoop(Cut(), [lookup]).stream("q"):
            seen.append(item)
    assert RAN == []
    assert [type(e).__name__ for e in seen][-3:] == [
        "ToolCallDelta",
        "ToolCallDelta",
        "RunFinished",
    ]
    assert seen[-1].stop_reason == "error"
    assert info.value.result.stop_reason == "error" and info.value.result.tool_calls == 0


class NoFinal:
    def complete(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover
        raise AssertionError("streaming only")

    def stream(self, request: ModelRequest) -> Iterator[Any]:
        yield TextDelta(text="hel")


def test_a_stream_without_its_final_response_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="ended without a final response"):
        list(ReActLoop(NoFinal(), []).stream("q"))


class CompleteOnly:
    def complete(self, request: ModelRequest) -> ModelResponse:
        return respond("plain")


def test_a_client_that_cannot_stream_still_streams_its_events() -> None:
    *events, result = ReActLoop(CompleteOnly(), []).stream("q")
    assert result.answer == "plain"
    assert not any(isinstance(e, TextDelta) for e in events)
    assert [type(e).__name__ for e in events] == [
        "RunStarted",
        "ModelCallStarted",
        "ModelCallFinished",
        "RunFinished",
    ]


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "lookup", "tool_args": {"key": "a"}},
        {"step_id": "#E2", "description": "b", "tool_name": "lookup", "tool_args": {"key": "b"}},
    ]
}


def test_rewoo_stream_shows_plan_steps_and_the_solver_writing() -> None:
    model = ScriptedModel([respond_structured(PLAN), respond("a and b")])
    *events, result = ReWOOPipeline(model, [lookup]).stream("both")
    assert isinstance(result, ReWOOResult) and result.answer == "a and b"
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("PlanMade") < kinds.index("ToolCallStarted") < kinds.index("RunFinished")
    solver_text = "".join(
        e.text for e in events[kinds.index("PlanMade") :] if isinstance(e, TextDelta)
    )
    assert solver_text == "a and b"
    assert sorted(RAN) == ["a", "b"]
    assert_order(events)


@pytest.mark.anyio
async def test_plan_and_execute_astream_nests_the_step_runs() -> None:
    model = ScriptedModel(
        [
            respond_structured({"steps": [{"step_number": 1, "description": "look up a"}]}),
            use_tools(("lookup", {"key": "a"})),
            respond("a found"),
            respond("report: a"),
        ]
    )
    items = [e async for e in PlanAndExecute(model, [lookup]).astream("t", run_id="pe")]
    *events, result = items
    assert isinstance(result, PlanExecuteResult) and result.answer == "report: a"
    step_runs = {e.run_id for e in events if e.loop == "react"}
    assert step_runs == {"pe.1"}
    starts = [e for e in events if isinstance(e, RunStarted)]
    assert [(s.run_id, s.parent_run_id) for s in starts] == [("pe", None), ("pe.1", "pe")]
    assert isinstance(events[-1], RunFinished) and events[-1].run_id == "pe"
