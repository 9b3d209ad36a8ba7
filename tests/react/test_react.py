import dataclasses
import pickle
import threading

import pytest

from agentloops import (
    BudgetExceeded,
    ConfigurationError,
    Message,
    ModelError,
    ModelRefused,
    ModelResponse,
    OutputTruncated,
    ReActLoop,
    ReActResult,
    RunStalled,
    StepLimitExceeded,
    Text,
    ToolCall,
    TranscriptError,
    Usage,
    tool,
    validate_transcript,
)
from agentloops.testing import FunctionModel, ScriptedModel, respond, use_tools


class Counter:
    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def record(self, *item):
        with self.lock:
            self.calls.append(item)


@pytest.fixture
def counter():
    return Counter()


@pytest.fixture
def add(counter):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        counter.record("add", a, b)
        return a + b

    return add


U = Usage(input_tokens=100, output_tokens=10, cache_read_tokens=50, cache_write_tokens=5)


@pytest.mark.parametrize("ending", ["answered", "stalled", "paused"])
def test_a_result_is_the_frozen_record_its_fields_make(add, ReActLoop, ending):
    call = use_tools(("add", {"a": 1, "b": 1}), usage=U)
    script = {"answered": [call, "2"], "stalled": [call] * 3, "paused": [call]}[ending]
    policy = (lambda c: "ask") if ending == "paused" else None
    result = ReActLoop(ScriptedModel(script), [add], approval=policy).run("q")
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(ReActResult)}
    assert vars(result) == fields  # every field set, nothing else
    rebuilt = ReActResult(**fields)
    assert result == rebuilt and repr(result) == repr(rebuilt)
    assert pickle.loads(pickle.dumps(result)) == rebuilt
    assert dataclasses.replace(result) == rebuilt
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.answer = "changed"
    assert (result.pending_approvals != []) is (ending == "paused")


def test_answer_without_tools(ReActLoop):
    model = ScriptedModel([respond("Paris.", usage=U)])
    result = ReActLoop(model, [], system="terse").run("Capital of France?")
    assert (result.answer, result.stop_reason, result.model_calls, result.tool_calls) == (
        "Paris.",
        "answered",
        1,
        0,
    )
    assert result.usage == U
    assert model.requests[0].system == "terse"
    result.raise_for_stop()  # answered: no error


def test_tool_loop_sums_usage_and_keeps_a_valid_transcript(add, counter, ReActLoop):
    model = ScriptedModel(
        [
            use_tools(("add", {"a": 2, "b": 3}), usage=U),
            use_tools(("add", {"a": 5, "b": 1}), usage=U),
            respond("6", usage=U),
        ]
    )
    result = ReActLoop(model, [add]).run("2+3+1?")
    assert result.answer == "6" and result.model_calls == 3 and result.tool_calls == 2
    assert result.usage == U + U + U
    assert counter.calls == [("add", 2, 3), ("add", 5, 1)]
    validate_transcript(result.messages)
    assert [m.role for m in result.messages] == ["user", "assistant"] * 3
    assert result.messages[2].tool_results[0].content == "5"
    assert [s.name for s in model.requests[0].tools] == ["add"]
    model.assert_complete()


def test_parallel_calls_run_concurrently_and_return_in_the_order_asked(ReActLoop):
    second_done = threading.Event()
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def slow() -> str:
        """Finishes last."""
        barrier.wait()  # both calls must be running at once to pass
        assert second_done.wait(5)
        return "slow"

    @tool
    def fast() -> str:
        """Finishes first."""
        barrier.wait()
        second_done.set()
        return "fast"

    model = ScriptedModel([use_tools(("slow", {}), ("fast", {})), "ok"])
    result = ReActLoop(model, [slow, fast]).run("go")
    results = result.messages[2].tool_results
    assert [r.content for r in results] == ["slow", "fast"]
    assert [r.call_id for r in results] == [c.id for c in result.messages[1].tool_calls]


def test_parallelism_is_bounded(ReActLoop):
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    @tool
    def work(i: int) -> int:
        """Some work."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            if running[0] == 2:
                gate.set()
        gate.wait(5)
        with lock:
            running[0] -= 1
        return i

    model = ScriptedModel([use_tools(*[("work", {"i": i}) for i in range(6)]), "ok"])
    result = ReActLoop(model, [work], max_parallel_tools=2).run("go")
    assert peak[0] == 2
    assert [r.content for r in result.messages[2].tool_results] == [str(i) for i in range(6)]


def test_a_single_call_runs_inline_on_the_callers_thread():
    threads = []

    @tool
    def where() -> str:
        """Which thread."""
        threads.append(threading.get_ident())
        return "here"

    ReActLoop(ScriptedModel([use_tools(("where", {})), "ok"]), [where]).run("go")
    assert threads == [threading.get_ident()]


def test_step_limit_stops_with_a_valid_transcript(add, counter, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": i, "b": 0})) for i in range(3)])
    result = ReActLoop(model, [add], max_steps=3).run("loop forever")
    assert result.stop_reason == "max_steps" and result.answer == ""
    assert result.model_calls == 3 and result.steps == 3 and len(counter.calls) == 3
    validate_transcript(result.messages)
    with pytest.raises(StepLimitExceeded, match="max_steps=3 reached after 3 steps") as info:
        result.raise_for_stop()
    assert info.value.result is result


def test_answer_at_limit_makes_one_tools_disabled_call(add, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1})), respond("best guess: 2")])
    result = ReActLoop(model, [add], max_steps=1, answer_at_limit=True).run("q")
    assert result.stop_reason == "max_steps" and result.answer == "best guess: 2"
    final = model.requests[-1]
    assert final.tool_choice == "none"
    assert "step limit" in final.messages[-1].text
    assert final.messages[-1].tool_results  # results still come first
    validate_transcript(result.messages)


def test_answer_at_limit_closes_calls_from_a_server_that_ignores_tool_choice(
    add, counter, ReActLoop
):
    model = ScriptedModel(
        [use_tools(("add", {"a": 1, "b": 1})), use_tools(("add", {"a": 9, "b": 9}))]
    )
    result = ReActLoop(model, [add], max_steps=1, answer_at_limit=True).run("q")
    assert counter.calls == [("add", 1, 1)]
    assert "tools are disabled" in result.messages[-1].tool_results[0].content
    validate_transcript(result.messages)


def test_token_budget_is_checked_before_the_next_call(add, ReActLoop):
    big = Usage(input_tokens=600)
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1}), usage=big)] * 2)
    result = ReActLoop(model, [add], max_total_tokens=1000).run("q")
    assert result.stop_reason == "budget" and result.model_calls == 2
    assert result.usage.total_tokens == 1200
    with pytest.raises(BudgetExceeded, match="max_total_tokens=1000 reached after 1200 tokens"):
        result.raise_for_stop()
    validate_transcript(result.messages)


def test_stall_guard_stops_repeated_identical_turns(add, counter, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1})) for _ in range(3)])
    result = ReActLoop(model, [add], max_repeats=3).run("q")
    assert result.stop_reason == "stalled" and len(counter.calls) == 3
    with pytest.raises(RunStalled):
        result.raise_for_stop()


def test_stall_guard_resets_when_anything_changes(add, ReActLoop):
    script = [use_tools(("add", {"a": 1, "b": 1})), use_tools(("add", {"a": 1, "b": 1}))]
    script += [use_tools(("add", {"a": 2, "b": 1})), use_tools(("add", {"a": 1, "b": 1})), "done"]
    result = ReActLoop(ScriptedModel(script), [add], max_repeats=3).run("q")
    assert result.stop_reason == "answered"
    off = ScriptedModel([use_tools(("add", {"a": 1, "b": 1}))] * 4 + ["done"])
    assert ReActLoop(off, [add], max_repeats=None).run("q").stop_reason == "answered"


def test_refusal(add, ReActLoop):
    result = ReActLoop(ScriptedModel([respond("I can't help", stop_reason="refusal")]), [add]).run(
        "q"
    )
    assert result.stop_reason == "refused"
    with pytest.raises(ModelRefused):
        result.raise_for_stop()


def test_refusal_with_tool_calls_runs_nothing_and_stays_valid(add, counter, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1}), stop_reason="refusal")])
    result = ReActLoop(model, [add]).run("q")
    assert result.stop_reason == "refused" and counter.calls == [] and result.tool_calls == 0
    assert "refusal" in result.messages[-1].tool_results[0].content
    validate_transcript(result.messages)


def test_tool_call_cut_by_max_tokens_is_never_executed(add, counter, ReActLoop):
    cut = use_tools(("add", {"a": 1}), stop_reason="max_tokens")
    model = ScriptedModel([cut, use_tools(("add", {"a": 1, "b": 2})), "3"])
    result = ReActLoop(model, [add]).run("q")
    assert counter.calls == [("add", 1, 2)] and result.tool_calls == 1
    note = result.messages[2].tool_results[0]
    assert note.is_error and "cut off" in note.content
    assert result.answer == "3"
    validate_transcript(result.messages)


@pytest.mark.parametrize("reason", ["max_tokens", "context_window"])
def test_truncated_answer_is_reported(reason, ReActLoop):
    result = ReActLoop(ScriptedModel([respond("The answer is", stop_reason=reason)]), []).run("q")
    assert result.stop_reason == reason and result.answer == "The answer is"
    with pytest.raises(OutputTruncated):
        result.raise_for_stop()


def test_answer_at_limit_right_after_a_paused_turn_adds_its_own_user_turn(ReActLoop):
    model = ScriptedModel([respond("Searching...", stop_reason="pause_turn"), "Best guess."])
    result = ReActLoop(model, [], max_steps=1, answer_at_limit=True).run("q")
    assert (result.stop_reason, result.answer) == ("max_steps", "Best guess.")
    final = model.requests[-1].messages
    assert [m.role for m in final] == ["user", "assistant", "user"]
    assert final[1].text == "Searching..." and "step limit" in final[2].text


def test_pause_turn_is_sent_back_to_continue(ReActLoop):
    model = ScriptedModel([respond("Searching...", stop_reason="pause_turn"), "Found it."])
    result = ReActLoop(model, []).run("q")
    assert result.answer == "Found it." and result.model_calls == 2
    assert model.requests[1].messages[-1].text == "Searching..."


def test_unknown_tool_is_an_error_result_the_model_sees(add, ReActLoop):
    model = ScriptedModel([use_tools(("delete_everything", {})), "sorry"])
    result = ReActLoop(model, [add]).run("q")
    error = result.messages[2].tool_results[0]
    assert error.is_error and "unknown tool 'delete_everything'" in error.content
    assert result.stop_reason == "answered"


def test_duplicate_call_ids_are_made_unique_and_all_answered(add, counter, ReActLoop):
    dup = ModelResponse(
        Message(
            "assistant",
            (ToolCall("same", "add", {"a": 1, "b": 1}), ToolCall("same", "add", {"a": 2, "b": 2})),
        ),
        "tool_use",
    )
    reuse = ModelResponse(
        Message("assistant", (ToolCall("same", "add", {"a": 3, "b": 3}),)), "tool_use"
    )
    result = ReActLoop(ScriptedModel([dup, reuse, "done"]), [add]).run("q")
    assert sorted(counter.calls) == [("add", 1, 1), ("add", 2, 2), ("add", 3, 3)]
    ids = [c.id for m in result.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 3
    validate_transcript(result.messages)


def test_model_errors_carry_the_partial_result(add, ReActLoop):
    model = ScriptedModel(
        [use_tools(("add", {"a": 1, "b": 1})), ModelError("overloaded", status=529)]
    )
    with pytest.raises(ModelError) as info:
        ReActLoop(model, [add]).run("q")
    partial = info.value.result
    assert isinstance(partial, ReActResult)
    assert partial.stop_reason == "error" and partial.tool_calls == 1
    validate_transcript(partial.messages)


def test_other_exceptions_propagate_unchanged(add, ReActLoop):
    with pytest.raises(KeyError):
        ReActLoop(ScriptedModel([KeyError("x")]), [add]).run("q")


def test_events_for_every_model_and_tool_call(add, ReActLoop):
    events = []
    model = ScriptedModel(
        [use_tools(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2}), usage=U), "2"]
    )
    result = ReActLoop(model, [add], on_event=events.append).run("q", run_id="run-1")
    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
    assert kinds.count("ModelCallStarted") == kinds.count("ModelCallFinished") == 2
    assert kinds.count("ToolCallStarted") == kinds.count("ToolCallFinished") == 2
    assert {e.run_id for e in events} == {"run-1"} and {e.loop for e in events} == {"react"}
    first_finish = next(e for e in events if type(e).__name__ == "ModelCallFinished")
    assert first_finish.usage == U and first_finish.seconds >= 0
    assert events[-1].stop_reason == "answered" and events[-1].model_calls == result.model_calls
    ats = [e.at for e in events]
    assert ats[0] <= ats[-1]


def test_run_continues_a_conversation(add, ReActLoop):
    first = ReActLoop(ScriptedModel(["4"]), [add]).run("2+2?")
    model = ScriptedModel(["8"])
    second = ReActLoop(model, [add]).run([*first.messages, Message.user("double it")])
    assert second.answer == "8" and len(model.requests[0].messages) == 3


def test_run_rejects_bad_transcripts(add, ReActLoop):
    loop = ReActLoop(ScriptedModel([]), [add])
    with pytest.raises(TranscriptError):
        loop.run([Message.assistant("hi")])
    with pytest.raises(ConfigurationError, match="end on a user turn"):
        loop.run([Message.user("a"), Message.assistant("b")])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": 0}, "max_steps must be >= 1, got 0"),
        ({"max_parallel_tools": 0}, "max_parallel_tools must be >= 1, got 0"),
        ({"max_total_tokens": 0}, "max_total_tokens must be >= 1, got 0"),
        ({"max_repeats": 1}, "max_repeats must be >= 2, got 1"),
    ],
)
def test_configuration_errors(kwargs, message, ReActLoop):
    with pytest.raises(ConfigurationError, match=message):
        ReActLoop(ScriptedModel([]), [], **kwargs)


def test_plain_functions_are_accepted_as_tools(ReActLoop):
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    result = ReActLoop(ScriptedModel([use_tools(("double", {"x": 4})), "8"]), [double]).run("q")
    assert result.messages[2].tool_results[0].content == "8"


def test_state_round_trip(add, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1}), usage=U), "2"])
    result = ReActLoop(model, [add]).run("q")
    again = ReActResult.from_state(result.to_state())
    assert again == result


def test_function_model_sees_each_request(add, ReActLoop):
    def brain(request):
        last = request.messages[-1]
        if last.tool_results:
            return respond(f"result was {last.tool_results[0].content}")
        return use_tools(("add", {"a": 20, "b": 22}))

    result = ReActLoop(FunctionModel(brain), [add]).run("q")
    assert result.answer == "result was 42"
    assert isinstance(result.messages[-1].content[0], Text)


def test_a_state_whose_pending_calls_are_not_in_the_last_turn_is_rejected(add, ReActLoop):
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1})), "2"])
    state = ReActLoop(model, [add]).run("q").to_state()
    state["pending_approvals"] = ["no-such-call"]
    with pytest.raises(ValueError, match="pending approvals"):
        ReActResult.from_state(state)


def test_raise_for_stop_on_an_errored_result_is_a_run_error(add, ReActLoop):
    from agentloops import RunError

    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 1})), ModelError("down")])
    with pytest.raises(ModelError) as caught:
        ReActLoop(model, [add]).run("q")
    with pytest.raises(RunError, match="ModelError: down"):
        caught.value.result.raise_for_stop()


def test_parallel_turns_in_a_row_each_get_their_results(add, counter, ReActLoop):
    model = ScriptedModel(
        [
            use_tools(("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})),
            use_tools(("add", {"a": 3, "b": 3}), ("add", {"a": 4, "b": 4})),
            use_tools(("add", {"a": 5, "b": 5})),
            "done",
        ]
    )
    result = ReActLoop(model, [add]).run("q")
    assert result.answer == "done" and result.tool_calls == 5
    sent = [[r.content for r in m.tool_results] for m in result.messages if m.tool_results]
    assert sent == [["2", "4"], ["6", "8"], ["10"]]
