"""Issue 12's loop-level rules, under both drivers where a driver is involved: sinks that
fail, tools that raise what is not an `Exception`, interrupts, limits on tool calls, empty
replies, stalls that cycle, and approvals that must not hang on one object."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    EmptyReply,
    Event,
    JSONLSink,
    Message,
    ModelCallFinished,
    ModelCallStarted,
    ModelResponse,
    RecordWriteError,
    RunStalled,
    StepLimitExceeded,
    Thinking,
    ToolCall,
    ToolCallFinished,
    tool,
    validate_transcript,
)
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools

RAN: list[Any] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append((a, b))
    return a + b


# -- a sink that fails ---------------------------------------------------------------------


class DiskFull:
    """A sink that works for `ok` events, then fails as a full disk does."""

    def __init__(self, ok: int):
        self.ok, self.seen = ok, []

    def __call__(self, event: Event) -> None:
        if len(self.seen) >= self.ok:
            raise RecordWriteError("No space left on device", path="events.jsonl", errno=28)
        self.seen.append(event)


@pytest.mark.parametrize("ok", [0, 3, 6])
def test_a_failing_sink_fails_the_run_with_its_partial_result(ok: int, ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2})), "3"])
    sink = DiskFull(ok)
    with pytest.raises(RecordWriteError, match="No space left") as info:
        ReActLoop(model, [add], on_event=sink).run("q")
    result = info.value.result
    assert result is not None and result.stop_reason == "error"
    assert len(sink.seen) == ok  # nothing more reached the broken sink
    validate_transcript(result.messages, allow_pending=True)


def test_a_jsonl_sink_on_a_full_disk_keeps_the_partial_result(ReActLoop: Any) -> None:
    with JSONLSink("/dev/full") as sink, pytest.raises(RecordWriteError) as info:
        ReActLoop(ScriptedModel(["hi"]), [], on_event=sink).run("q")
    assert info.value.errno == 28 and info.value.result.stop_reason == "error"


class FailsOn:
    """A sink that fails as a full disk does at the first event of kind `kind`."""

    def __init__(self, kind: type[Event]):
        self.kind, self.seen = kind, []

    def __call__(self, event: Event) -> None:
        if isinstance(event, self.kind):
            raise RecordWriteError("No space left on device", path="events.jsonl", errno=28)
        self.seen.append(event)


def test_a_sink_failing_after_a_tool_ran_keeps_its_outcome_in_a_react_run(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2})), "3"])
    with pytest.raises(RecordWriteError) as info:
        ReActLoop(model, [add], on_event=FailsOn(ToolCallFinished)).run("q")
    result = info.value.result
    assert RAN == [(1, 2)] and model.calls == 1  # it ran; the run stopped there
    assert result.stop_reason == "error" and result.tool_calls == 1
    [answered] = result.messages[-1].content  # its result is in the transcript
    assert (answered.call_id, answered.content) == (result.messages[-2].tool_calls[0].id, "3")
    validate_transcript(result.messages)


def test_a_sink_failing_in_a_parallel_turn_keeps_the_outcomes_that_came_back(
    ReActLoop: Any,
) -> None:
    release = threading.Event()

    @tool
    def late() -> str:
        """Waits until the test lets it go."""
        release.wait(10)
        return "late"

    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2}), ("late", {})), "never"])
    try:
        with pytest.raises(RecordWriteError) as info:
            ReActLoop(model, [add, late], on_event=FailsOn(ToolCallFinished)).run("q")
    finally:
        release.set()
    result = info.value.result
    assert result.tool_calls == 1 and [r.content for r in result.held_results] == ["3"]


def test_a_sink_failing_after_a_tool_ran_keeps_its_evidence_in_a_rewoo_run(
    ReWOOPipeline: Any,
) -> None:
    plan = {
        "steps": [
            {
                "step_id": "#E1",
                "description": "x",
                "tool_name": "add",
                "tool_args": {"a": 1, "b": 2},
            }
        ]
    }
    model = ScriptedModel([respond_structured(plan), "3"])
    with pytest.raises(RecordWriteError) as info:
        ReWOOPipeline(model, [add], on_event=FailsOn(ToolCallFinished)).run("q")
    assert RAN == [(1, 2)] and model.calls == 1
    assert info.value.result.evidence["#E1"].content == "3"


def test_a_sink_failing_after_a_tool_ran_counts_it_in_a_plan_and_execute_run(
    PlanAndExecute: Any,
) -> None:
    plan = {"steps": [{"step_number": 1, "description": "add"}]}
    model = ScriptedModel(
        [respond_structured(plan), use_tools(("add", {"a": 1, "b": 2})), "3", "report"]
    )
    with pytest.raises(RecordWriteError) as info:
        PlanAndExecute(model, [add], on_event=FailsOn(ToolCallFinished)).run("q")
    assert RAN == [(1, 2)] and model.calls == 2
    assert info.value.result.tool_calls == 1


@pytest.mark.parametrize("kind", [ModelCallStarted, ModelCallFinished])
def test_a_sink_failing_at_a_model_call_keeps_the_reply_or_makes_no_call(
    kind: type[Event], ReActLoop: Any
) -> None:
    model = ScriptedModel(["hi"])
    with pytest.raises(RecordWriteError) as info:
        ReActLoop(model, [add], on_event=FailsOn(kind)).run("q")
    result = info.value.result
    made = kind is ModelCallFinished  # its event could not be written: the call is not made
    assert model.calls == result.model_calls == int(made)
    assert (result.messages[-1].text == "hi") is made and result.stop_reason == "error"


def test_a_sink_failing_at_a_typed_answer_keeps_the_reply_and_asks_no_validator(
    ReActLoop: Any,
) -> None:
    import pydantic

    class Sum(pydantic.BaseModel):
        total: int

    checked: list[Any] = []

    def check(out: Sum, context: Any) -> Sum:
        checked.append(out)
        return out

    model = ScriptedModel([respond_structured({"total": 3})])
    loop = ReActLoop(
        model, [], output_type=Sum, output_validator=check, on_event=FailsOn(ModelCallFinished)
    )
    with pytest.raises(RecordWriteError) as info:
        loop.run("q")
    result = info.value.result
    assert model.calls == result.model_calls == 1 and result.stop_reason == "error"
    assert checked == []  # the validator is new work: a failed sink starts none


def test_a_durable_run_whose_sink_fails_after_a_tool_journals_its_outcome(ReActLoop: Any) -> None:
    from agentloops.journal import MemoryStore

    store = MemoryStore()
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2}))])
    with pytest.raises(RecordWriteError):
        ReActLoop(model, [add], store=store, on_event=FailsOn(ToolCallFinished)).run(
            "q", run_id="r1"
        )
    kinds = [r.kind for r in store.read("r1")]
    assert "tool_finished" in kinds  # a resume does not run it again, nor doubt it
    again = ScriptedModel(["3"])
    assert ReActLoop(again, [add], store=store).resume("r1").answer == "3"
    assert RAN == [(1, 2)]


# -- BaseExceptions from tools: one rule in every loop --------------------------------------


@tool
def leave() -> str:
    """Calls sys.exit, as a careless tool might."""
    raise SystemExit(3)


def test_system_exit_from_a_tool_ends_a_react_run(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("leave", {}), ("add", {"a": 1, "b": 1})), "never"])
    with pytest.raises(SystemExit):
        ReActLoop(model, [leave, add]).run("q")


PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "x", "tool_name": "leave", "tool_args": {}},
        {"step_id": "#E2", "description": "y", "tool_name": "add", "tool_args": {"a": 1, "b": 1}},
    ]
}


def test_system_exit_from_a_tool_ends_a_rewoo_run_too(ReWOOPipeline: Any) -> None:
    model = ScriptedModel([respond_structured(PLAN), "never answered"])
    with pytest.raises(SystemExit):
        ReWOOPipeline(model, [leave, add]).run("q")


# -- Ctrl-C during a parallel turn ends the process at once ----------------------------------

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from agentloops import ReActLoop, ReWOOPipeline, tool
    from agentloops.testing import ScriptedModel, respond_structured, use_tools

    @tool
    def slow(n: int) -> str:
        '''Sleeps a minute.'''
        os.write(1, b"started\\n")  # one write: two threads never interleave
        time.sleep(60)
        return "late"

    if sys.argv[1] == "react":
        model = ScriptedModel([use_tools(("slow", {"n": 1}), ("slow", {"n": 2})), "never"])
        ReActLoop(model, [slow]).run("q")
    else:
        steps = [{"step_id": f"#E{i}", "description": "s", "tool_name": "slow",
                  "tool_args": {"n": i}} for i in (1, 2)]
        ReWOOPipeline(ScriptedModel([respond_structured({"steps": steps}), "x"]), [slow]).run("q")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["react", "rewoo"])
def test_ctrl_c_in_a_parallel_tool_turn_ends_the_process_within_two_seconds(loop: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, loop], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as child:
        assert child.stdout is not None
        for _ in range(2):  # both calls are running
            assert child.stdout.readline().strip() == b"started"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        try:
            _, err = child.communicate(timeout=10)
        finally:
            child.kill()
        took = time.monotonic() - sent
    assert child.returncode != 0 and b"KeyboardInterrupt" in err
    assert took < 2.0, f"the process took {took:.1f} s to end after Ctrl-C"


# -- limits on tool calls ------------------------------------------------------------------


@pytest.mark.parametrize("per_turn", [1, 3])
def test_calls_beyond_the_per_turn_limit_are_answered_not_run(
    ReActLoop: Any, per_turn: int
) -> None:
    many = use_tools(*[("add", {"a": i, "b": 0}) for i in range(5)])
    model = ScriptedModel([many, "done"])
    result = ReActLoop(model, [add], max_calls_per_turn=per_turn).run("q")
    assert result.tool_calls == per_turn and RAN[:] == [(i, 0) for i in range(per_turn)]
    contents = [r.content for r in result.messages[2].tool_results]
    assert contents[:per_turn] == [str(i) for i in range(per_turn)]
    note = f"not run: at most {per_turn} calls per turn; ask for fewer"
    assert contents[per_turn:] == [note] * (5 - per_turn)
    assert result.stop_reason == "answered"
    validate_transcript(result.messages)


def test_the_per_run_limit_stops_the_run_before_the_turn_that_would_pass_it(
    ReActLoop: Any,
) -> None:
    script = [use_tools(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2}))] * 2 + ["x"]
    result = ReActLoop(ScriptedModel(script), [add], max_tool_calls=3).run("q")
    assert result.stop_reason == "max_tool_calls" and result.tool_calls == 2
    assert result.detail == "max_tool_calls=3 reached after 2 tool calls"
    validate_transcript(result.messages)
    with pytest.raises(StepLimitExceeded, match="max_tool_calls=3"):
        result.raise_for_stop()


# -- the stall guard sees cycles -----------------------------------------------------------


def test_a_two_turn_cycle_is_a_stall(ReActLoop: Any) -> None:
    a, b = use_tools(("add", {"a": 1, "b": 1})), use_tools(("add", {"a": 2, "b": 2}))
    model = ScriptedModel([a, b, a, b, a, b, "never"])
    result = ReActLoop(model, [add], max_repeats=3).run("q")
    assert result.stop_reason == "stalled" and result.steps == 6
    with pytest.raises(RunStalled, match="cycle"):
        result.raise_for_stop()


def test_a_cycle_that_breaks_is_not_a_stall(ReActLoop: Any) -> None:
    a, b = use_tools(("add", {"a": 1, "b": 1})), use_tools(("add", {"a": 2, "b": 2}))
    c = use_tools(("add", {"a": 3, "b": 3}))
    model = ScriptedModel([a, b, a, b, a, c, "done"])
    assert ReActLoop(model, [add], max_repeats=3).run("q").stop_reason == "answered"


_TURNS = {
    "A": [("add", {"a": 1, "b": 1})],
    "B": [("add", {"a": 2, "b": 2})],
    "C": [("add", {"a": 3, "b": 3})],
    "D": [("add", {"a": 4, "b": 4})],
    "P": [("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})],  # two calls in one turn
}


@pytest.mark.parametrize(
    ("turns", "max_repeats", "stalled_at"),
    [
        ("AAA", 3, 3),
        ("BAAA", 3, 4),
        ("ABABAB", 3, 6),
        ("ABCABCABC", 3, 9),
        ("DABCABCABC", 3, 10),
        ("PPP", 3, 3),
        ("AA", 2, 2),
        ("ABAB", 2, 4),
        ("AABAA", 3, None),  # A three times, but never three in a row
        ("ABACABACABAC", 3, None),  # a cycle of four turns is not looked for
        ("ABCABCABD", 3, None),
        ("APAPAP", 3, 6),
        ("ABAB", 3, None),
    ],
)
def test_the_stall_guard_finds_exactly_the_repeats_it_looks_for(
    ReActLoop: Any, turns: str, max_repeats: int, stalled_at: int | None
) -> None:
    script: list[Any] = [use_tools(*_TURNS[t]) for t in turns] + ["done"]
    result = ReActLoop(ScriptedModel(script), [add], max_repeats=max_repeats).run("q")
    if stalled_at is None:
        assert (result.stop_reason, result.steps) == ("answered", len(turns) + 1)
    else:
        assert (result.stop_reason, result.steps) == ("stalled", stalled_at)


# -- empty replies -------------------------------------------------------------------------


def empty() -> ModelResponse:
    return ModelResponse(Message("assistant", ()), "end_turn")


def test_an_empty_reply_gets_one_nudge_then_an_answer(ReActLoop: Any) -> None:
    model = ScriptedModel([empty(), "Paris."])
    result = ReActLoop(model, []).run("Capital of France?")
    assert (result.answer, result.stop_reason, result.model_calls) == ("Paris.", "answered", 2)
    assert "Your reply was empty" in model.requests[1].messages[-1].text
    validate_transcript(result.messages)


def test_two_empty_replies_stop_the_run_as_empty(ReActLoop: Any) -> None:
    blank = respond(" ")  # whitespace only counts as empty
    thinking_only = ModelResponse(Message("assistant", (Thinking("hmm", "sig"),)), "end_turn")
    result = ReActLoop(ScriptedModel([blank, thinking_only]), []).run("q")
    assert result.stop_reason == "empty" and result.answer == ""
    validate_transcript(result.messages)
    with pytest.raises(EmptyReply):
        result.raise_for_stop()


def test_an_empty_solver_reply_is_retried_then_reported(ReWOOPipeline: Any) -> None:
    plan = {"steps": [PLAN["steps"][1]]}
    model = ScriptedModel([respond_structured(plan), empty(), empty()])
    result = ReWOOPipeline(model, [add]).run("q")
    assert result.stop_reason == "empty" and result.model_calls == 3


def test_an_empty_reporter_reply_is_retried(PlanAndExecute: Any) -> None:
    plan = {"steps": [{"step_number": 1, "description": "add"}]}
    model = ScriptedModel([respond_structured(plan), "2", empty(), "The answer is 2."])
    result = PlanAndExecute(model, [add]).run("q")
    assert result.answer == "The answer is 2." and result.stop_reason == "answered"


# -- approvals: a predicate on the arguments, and one resume per pause ---------------------


@tool(read_only=False, requires_approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(("pay", amount))
    return f"paid {amount}"


def test_a_predicate_asks_only_for_the_calls_it_names(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("pay", {"amount": 50}), ("pay", {"amount": 500}))])
    result = ReActLoop(model, [pay]).run("pay both")
    assert result.stop_reason == "approval_required"
    assert [c.args for c in result.pending_approvals] == [{"amount": 500}]
    assert RAN == [("pay", 50)]


def test_deny_beats_a_predicate_that_would_allow(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("pay", {"amount": 5})), "ok"])
    result = ReActLoop(model, [pay], approval=lambda call: "deny").run("q")
    assert RAN == [] and result.messages[2].tool_results[0].is_error


def test_a_pause_resumes_once_whatever_loop_object_resumes_it(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(ToolCall("big", "pay", {"amount": 500})), "paid"])
    paused = ReActLoop(model, [pay]).run("q")
    ReActLoop(model, [pay]).resume(paused, {"big": True})
    with pytest.raises(ConfigurationError, match="already resumed"):
        ReActLoop(ScriptedModel(["again"]), [pay]).resume(paused, {"big": True})
    assert RAN == [("pay", 500)]


def test_two_plan_and_execute_objects_over_one_checkpointer_run_the_call_once(
    tmp_path: Path,
) -> None:
    from agentloops import PlanAndExecute, SQLiteCheckpointer

    plan = {"steps": [{"step_number": 1, "description": "pay"}]}
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    first = ScriptedModel(
        [respond_structured(plan), use_tools(ToolCall("big", "pay", {"amount": 500}))]
    )
    PlanAndExecute(first, [pay], checkpointer=store).run("pay", run_id="r")
    one = PlanAndExecute(ScriptedModel(["paid", "report"]), [pay], checkpointer=store)
    two = PlanAndExecute(ScriptedModel(["paid", "report"]), [pay], checkpointer=store)
    assert one.resume("r", {"big": True}).answer == "report"
    assert two.resume("r", {"big": True}).answer == "report"  # the recorded run, replayed
    with pytest.raises(ConfigurationError, match="already decided"):
        two.resume("r", {"big": False})
    assert RAN == [("pay", 500)]


# -- async and sync tools in one turn -------------------------------------------------------


@tool
async def fetch(key: str) -> str:
    """Fetch asynchronously."""
    RAN.append(("fetch", key))
    return f"fetched {key}"


def test_an_async_tool_and_a_sync_tool_in_one_turn(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("fetch", {"key": "k"}), ("add", {"a": 1, "b": 1})), "ok"])
    result = ReActLoop(model, [fetch, add]).run("q")
    assert [r.content for r in result.messages[2].tool_results] == ["fetched k", "2"]


def test_a_stream_from_a_plain_iterator_is_fine() -> None:
    from agentloops import ReActLoop

    class ListStream:
        def complete(self, request: Any) -> ModelResponse:  # pragma: no cover
            raise AssertionError

        def stream(self, request: Any) -> Any:
            return iter([respond("fine")])

    *_, result = ReActLoop(ListStream(), []).stream("q")
    assert result.answer == "fine"


def test_json_of_the_events_file_is_whole_lines(tmp_path: Path, ReActLoop: Any) -> None:
    path = tmp_path / "events.jsonl"
    with JSONLSink(path) as sink:
        ReActLoop(ScriptedModel(["hi"]), [], on_event=sink).run("q")
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["event"] == "RunStarted"
