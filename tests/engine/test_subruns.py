"""Agent tools (`loop.as_tool`): sub-runs of each loop kind inside each loop kind, under both
drivers, next to plain tools and each other; what rolls up into the calling run (usage,
model and tool calls, each sub-run), their events in the caller's stream, and what a call
gets when its sub-run cannot start, stops short or fails."""

from __future__ import annotations

import asyncio
import pickle
import threading
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
from _subagents import (
    KINDS,
    OWN_CALLS,
    TASK,
    USAGE,
    add_tool,
    calls,
    parent_loop,
    results_of,
    sub_loop,
)

from agentloops import (
    ConfigurationError,
    Event,
    ModelError,
    ModelRequest,
    ModelResponse,
    Price,
    ReActLoop,
    ReWOOPipeline,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolRegistry,
    tool,
)
from agentloops.engine.subruns import AgentTool
from agentloops.testing import FunctionModel, ScriptedModel, respond, use_tools

DRIVERS = ("sync", "async")
PRICE = Price(input=1, output=2)


def drive(loop: Any, task: Any, driver: str, **options: Any) -> Any:
    if driver == "sync":
        return loop.run(task, **options)
    return asyncio.run(loop.arun(task, **options))


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("inner", KINDS)
@pytest.mark.parametrize("outer", KINDS)
def test_a_sub_agent_of_each_kind_answers_inside_each_kind_and_its_spending_counts(
    outer: str, inner: str, driver: str
) -> None:
    log: list[str] = []
    sub = sub_loop(inner, log).as_tool("sub", "Adds numbers.")
    result = drive(parent_loop(outer, sub, log), TASK, driver, run_id="top")
    assert result.stop_reason == "answered"
    assert "sum=5" in result.answer
    model_calls = OWN_CALLS[outer] + OWN_CALLS[inner]
    assert result.model_calls == model_calls
    assert result.usage.input_tokens == 10 * model_calls
    assert result.usage.output_tokens == 5 * model_calls
    (run,) = result.subruns
    loop_kind = {"react": "react", "rewoo": "rewoo", "pe": "plan_execute"}[inner]
    assert (run.name, run.loop, run.stop_reason) == ("sub", loop_kind, "answered")
    assert run.model_calls == OWN_CALLS[inner] and run.usage.total_tokens == 15 * run.model_calls
    assert run.tool_calls == 1  # its own add
    assert (
        run.run_id
        == {"react": "top:outer_1", "rewoo": "top:plan0:#E1", "pe": "top.1:outer_1"}[outer]
    )
    assert log.count("add(2,3)") == 1 and log.count("add(1,1)") == 1
    if outer != "rewoo":  # tool calls: the sub-agent's call, the plain one, and the inner one
        assert result.tool_calls == 3


@pytest.mark.parametrize("driver", DRIVERS)
def test_several_sub_runs_of_one_turn_run_at_once_and_their_events_reach_the_driver_thread(
    driver: str,
) -> None:
    started = threading.Barrier(2, timeout=10)
    arrived: list[str] = []
    both = asyncio.Event() if driver == "async" else None

    def reply(request: ModelRequest) -> ModelResponse:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall("i1", "add", {"a": 2, "b": 3}))
        return respond(f"sum={seen[-1]}", usage=USAGE)

    def meet(request: ModelRequest) -> ModelResponse:
        if not results_of(request.messages):
            started.wait()  # both sub-runs are in their first model call at once (threads)
        return reply(request)

    async def ameet(request: ModelRequest) -> ModelResponse:
        if not results_of(request.messages):  # ... or tasks
            arrived.append(request.messages[0].text)
            if len(arrived) == 2:
                both.set()  # type: ignore[union-attr]
            await asyncio.wait_for(both.wait(), 10)  # type: ignore[union-attr]
        return reply(request)

    inner = ReActLoop(FunctionModel(meet if both is None else ameet), [add_tool()])
    script = [
        use_tools(("left", {"task": "a"}), ("right", {"task": "b"}), ("add", {"a": 1, "b": 1})),
        "both done",
    ]
    threads: set[int] = set()
    events: list[Event] = []

    def sink(event: Event) -> None:
        threads.add(threading.get_ident())
        events.append(event)

    outer = ReActLoop(
        ScriptedModel(script),
        [inner.as_tool("left", "Adds."), inner.as_tool("right", "Adds."), add_tool()],
        on_event=sink,
    )
    result = drive(outer, "go", driver)
    assert result.answer == "both done" and result.model_calls == 2 + 2 * 2
    assert sorted(s.name for s in result.subruns) == ["left", "right"]
    assert results_of(result.messages) == ["sum=5", "sum=5", "2"]  # in the order asked
    assert len(threads) == 1  # every event came to the sink on one thread
    assert sum(isinstance(e, RunStarted) for e in events) == 3


def test_a_sub_runs_events_name_its_parent_and_sit_inside_the_call_that_made_it() -> None:
    events: list[Event] = []
    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    parent_loop("react", sub, on_event=events.append).run(TASK, run_id="top")
    inner = [e for e in events if e.run_id == "top:outer_1"]
    assert inner and all(e.parent_run_id == "top" for e in inner)
    start = next(e for e in inner if isinstance(e, RunStarted))
    assert start.parent_call_id == "outer_1"
    top = [e for e in events if e.run_id == "top"]
    assert all(e.parent_run_id is None for e in top)
    order = [
        (type(e).__name__, e.run_id)
        for e in events
        if isinstance(e, RunStarted | RunFinished)
        or (isinstance(e, ToolCallStarted | ToolCallFinished) and e.name == "sub")
    ]
    assert order == [
        ("RunStarted", "top"),
        ("ToolCallStarted", "top"),
        ("RunStarted", "top:outer_1"),
        ("RunFinished", "top:outer_1"),
        ("ToolCallFinished", "top"),
        ("RunFinished", "top"),
    ]
    finished = next(e for e in events if isinstance(e, ToolCallFinished) and e.name == "sub")
    assert finished.outcome.run is not None and finished.outcome.run.model_calls == 2


@pytest.mark.parametrize("inner", KINDS)
def test_a_plan_and_execute_steps_events_name_their_run(inner: str) -> None:
    events: list[Event] = []
    sub = sub_loop(inner).as_tool("sub", "Adds numbers.")
    parent_loop("pe", sub, on_event=events.append).run(TASK, run_id="pe")
    step = [e for e in events if e.run_id == "pe.1"]
    assert step and all(e.parent_run_id == "pe" for e in step)
    below = [e for e in events if e.run_id == "pe.1:outer_1"]
    assert below and all(e.parent_run_id == "pe.1" for e in below)


@pytest.mark.parametrize("inner", KINDS)
def test_stream_carries_a_sub_runs_deltas_marked_with_the_sub_run(inner: str) -> None:
    sub = sub_loop(inner).as_tool("sub", "Adds numbers.")
    items = list(parent_loop("react", sub).stream(TASK, run_id="top"))
    *events, result = items
    assert result.answer.startswith("parent: sum=5")
    inner_text = "".join(e.text for e in events if isinstance(e, TextDelta) and e.run_id != "top")
    assert "sum=5" in inner_text
    deltas = [e for e in events if isinstance(e, TextDelta) and e.run_id != "top"]
    marks = {(e.run_id, e.parent_run_id) for e in deltas}  # a step's name its run
    assert marks <= {("top:outer_1", "top"), ("top:outer_1.1", "top:outer_1")}
    assert ("top:outer_1", "top") in marks


@pytest.mark.anyio
@pytest.mark.parametrize("inner", KINDS)
async def test_astream_carries_a_sub_runs_deltas_marked_with_the_sub_run(inner: str) -> None:
    sub = sub_loop(inner).as_tool("sub", "Adds numbers.")
    items = [item async for item in parent_loop("react", sub).astream(TASK, run_id="top")]
    *events, result = items
    assert result.answer.startswith("parent: sum=5")
    deltas = [e for e in events if isinstance(e, TextDelta) and e.run_id.startswith("top:")]
    assert "sum=5" in "".join(e.text for e in deltas)
    marks = {(e.run_id, e.parent_run_id) for e in deltas}
    assert marks <= {("top:outer_1", "top"), ("top:outer_1.1", "top:outer_1")}


def test_closing_a_stream_during_a_sub_run_on_a_thread_stops_it_before_its_next_call() -> None:
    gate = threading.Event()
    asked: list[str] = []

    def slow(request: ModelRequest) -> ModelResponse:
        asked.append(request.messages[0].text)
        gate.wait(10)
        return calls(ToolCall(f"x{len(asked)}", "add", {"a": 1, "b": 2}))

    inner = ReActLoop(FunctionModel(slow), [add_tool()], max_steps=50)
    outer = ReActLoop(
        ScriptedModel([use_tools(("a", {"task": "one"}), ("b", {"task": "two"}))]),
        [inner.as_tool("a", "Adds."), inner.as_tool("b", "Adds.")],
    )
    items = outer.stream("go")
    for item in items:
        if isinstance(item, ToolCallStarted) and item.name == "b":
            break
    items.close()  # the run ends: its sub-runs stop before their next model call
    gate.set()
    for _ in range(200):
        if len(asked) >= 2:
            break
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)
    assert len(asked) == 2  # each sub-run made the one call it was in, and no other


def test_input_type_makes_the_arguments_and_the_task_is_their_json() -> None:
    class Question(pydantic.BaseModel):
        city: str
        year: int

    seen: list[str] = []

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request.messages[0].text)
        return respond("Paris, 1900.")

    inner = ReActLoop(FunctionModel(answer), [])
    agent = inner.as_tool("history", "Answers history questions.", input_type=Question)
    assert agent.input_schema["required"] == ["city", "year"]
    outer = ReActLoop(
        ScriptedModel(
            [
                use_tools(("history", {"city": "Paris", "year": "soon"})),
                use_tools(("history", {"city": "Paris", "year": 1900})),
                "ok",
            ]
        ),
        [agent],
    )
    result = outer.run("When?")
    first, second = results_of(result.messages)
    assert "invalid arguments for 'history'" in first and "year" in first
    assert second == "Paris, 1900."
    assert pydantic.TypeAdapter(dict).validate_json(seen[0]) == {"city": "Paris", "year": 1900}
    assert [s.name for s in result.subruns] == ["history"]  # the refused call made no run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"name": "no spaces allowed", "description": "x"}, "must match"),
        ({"name": "ok", "description": " "}, "needs a description"),
        ({"name": "ok", "description": "x", "input_type": dict}, "pydantic model class"),
    ],
)
def test_as_tool_refuses_a_bad_name_description_or_input_type(
    args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ReActLoop(ScriptedModel([]), []).as_tool(**args)


def test_an_agent_tool_called_outside_a_loop_runs_its_loop_plainly() -> None:
    agent = sub_loop("react").as_tool("sub", "Adds numbers.")
    outcome = ToolRegistry([agent]).call("sub", {"task": TASK})
    assert (outcome.content, outcome.is_error, outcome.run) == ("sum=5", False, None)
    assert agent(task=TASK) == "sum=5"


def test_a_sub_run_that_stops_short_is_an_error_result_that_says_how() -> None:
    def busy(request: ModelRequest) -> ModelResponse:
        n = sum(m.role == "assistant" for m in request.messages)
        return ModelResponse(
            use_tools(ToolCall(f"b{n}", "add", {"a": n, "b": 1}), text="Still working.").message,
            "tool_use",
            USAGE,
        )

    inner = ReActLoop(FunctionModel(busy), [add_tool()], max_steps=2)
    outer = ReActLoop(
        ScriptedModel([use_tools(("sub", {"task": "x"})), "gave up"]),
        [inner.as_tool("sub", "Adds.")],
    )
    result = outer.run("go")
    (text,) = results_of(result.messages[:3])
    assert text.startswith("sub stopped without an answer (max_steps: max_steps=2 reached")
    assert "its last words" not in text
    assert result.subruns[0].stop_reason == "max_steps" and result.model_calls == 4
    assert result.messages[2].content[0].is_error  # type: ignore[union-attr]


def test_a_sub_agent_that_cannot_make_a_plan_is_an_error_result_with_its_spending() -> None:
    bad = {"steps": [{"step_id": "#E1", "description": "?", "tool_name": "nope", "tool_args": {}}]}

    def planner(request: ModelRequest) -> ModelResponse:
        from agentloops.testing import respond_structured

        return respond_structured(bad, usage=USAGE)

    inner = ReWOOPipeline(FunctionModel(planner), [add_tool()])
    outer = ReActLoop(
        ScriptedModel([use_tools(("facts", {"task": "x"})), "no facts"]),
        [inner.as_tool("facts", "Finds facts.")],
    )
    result = outer.run("go")
    (text,) = results_of(result.messages[:3])
    assert text.startswith("facts failed: PlanValidationError: invalid plan")
    assert result.subruns[0].stop_reason == "invalid_plan"
    assert result.subruns[0].model_calls == 1 and result.model_calls == 3


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_model_failure_in_a_sub_run_fails_the_calling_run_with_its_partial_result(
    driver: str,
) -> None:
    inner = ReActLoop(ScriptedModel([ModelError("overloaded")]), [])
    outer = ReActLoop(
        ScriptedModel([use_tools(("sub", {"task": "x"}))]), [inner.as_tool("sub", "Asks.")]
    )
    with pytest.raises(ModelError, match="overloaded") as caught:
        drive(outer, "go", driver, run_id="top")
    partial = caught.value.result
    assert partial.run_id == "top" and partial.model_calls == 1 and partial.stop_reason == "error"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_loop_that_calls_itself_stops_at_max_depth_with_an_error_result(driver: str) -> None:
    def deeper(request: ModelRequest) -> ModelResponse:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall("again", "recurse", {"task": "deeper"}))
        return respond(f"up: {seen[-1][:40]}")

    loop = ReActLoop(FunctionModel(deeper), [], max_depth=3)
    loop.tools.register(loop.as_tool("recurse", "Asks itself."))
    result = drive(loop, "go", driver, run_id="r")
    assert result.model_calls == 8  # the run and three levels below it, two calls each
    assert result.answer.startswith("up: up: up: up: not run: a sub-run here")
    (run,) = result.subruns
    assert run.run_id == "r:again" and run.model_calls == 6


def test_the_deepest_refusal_says_how_deep_and_where() -> None:
    texts: list[str] = []

    def deeper(request: ModelRequest) -> ModelResponse:
        seen = results_of(request.messages)
        if not seen:
            return calls(ToolCall("again", "recurse", {"task": "deeper"}))
        texts.append(seen[-1])
        return respond("up")

    loop = ReActLoop(FunctionModel(deeper), [], max_depth=1)
    loop.tools.register(loop.as_tool("recurse", "Asks itself."))
    loop.run("go")
    assert texts[0] == (
        "not run: a sub-run here would be 2 levels deep, past max_depth=1 (at the run > recurse)"
    )


def test_max_depth_zero_allows_no_sub_run() -> None:
    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    result = parent_loop("react", sub, max_depth=0).run(TASK)
    assert results_of(result.messages)[0].startswith("not run: a sub-run here would be 1 levels")
    assert result.subruns == []


def test_rewoo_refuses_a_plan_that_uses_an_agent_tool_that_may_pause() -> None:
    from agentloops import PlanValidationError, validate_plan
    from agentloops.rewoo._plan import asks_a_person

    asking = ReActLoop(ScriptedModel([]), [add_tool(requires_approval=True)])
    agent = asking.as_tool("sub", "Adds.")
    quiet = sub_loop("react").as_tool("sub", "Adds.")
    assert asks_a_person(agent) and not asks_a_person(quiet)
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "x", "tool_name": "sub", "tool_args": {"task": "t"}}
        ]
    }
    with pytest.raises(PlanValidationError, match="may pause for human approval"):
        validate_plan(plan, [agent])
    validate_plan(plan, [quiet])


class Plain:
    """A picklable model (the scripted fakes hold locks): it answers "inner", or with what
    its tool call returned."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        seen = results_of(request.messages)
        if request.tools and not seen:
            return use_tools(ToolCall("p1", "sub", {"task": "x"}))
        return respond(f"outer: {seen[-1]}" if seen else "inner")


def test_a_loop_with_agent_tools_pickles_and_its_copy_still_hosts_them() -> None:
    inner = ReActLoop(Plain(), [])
    loop = ReActLoop(Plain(), [inner.as_tool("sub", "Asks.")], max_cost=1, price=PRICE)
    copy = pickle.loads(pickle.dumps(loop))
    agent = copy.tools.get("sub")
    assert isinstance(agent, AgentTool) and agent.hosted and agent.loop is not inner
    result = copy.run("go")
    assert result.answer == "outer: inner" and result.subruns[0].model_calls == 1


def test_an_answer_with_typed_output_reaches_the_caller_as_json() -> None:
    from agentloops.engine.subruns import _answer

    class Report(pydantic.BaseModel):
        city: str

    @dataclass
    class Typed:
        answer: str
        output: Any

    assert _answer(Typed("Paris", Report(city="Paris"))) == '{"city":"Paris"}'
    assert _answer(Typed("Paris", {"city": "Paris"})) == '{"city": "Paris"}'
    assert _answer(Typed("Paris", None)) == "Paris"


def test_the_fast_single_call_path_is_not_taken_for_an_agent_tool() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    inner = ReActLoop(ScriptedModel(["inner"]), [])
    outer = ReActLoop(
        ScriptedModel([use_tools(("sub", {"task": "x"})), "done"]),
        [
            inner.as_tool("sub", "Asks."),
            echo,
        ],
    )
    result = outer.run("go")
    assert result.subruns[0].name == "sub" and result.model_calls == 3


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_rewoo_parent_with_an_executor_hosts_its_agent_steps_itself(driver: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from _subagents import PARENT_PLAN

    from agentloops.testing import respond_structured

    def planner(request: ModelRequest) -> ModelResponse:
        if request.output is not None:
            return respond_structured(PARENT_PLAN, usage=USAGE)
        return respond("parent: " + request.messages[-1].text[-30:], usage=USAGE)

    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    with ThreadPoolExecutor(2) as pool:
        loop = ReWOOPipeline(FunctionModel(planner), [sub, add_tool()], executor=pool)
        result = drive(loop, TASK, driver)
    assert result.evidence["#E1"].content == "sum=5" and result.evidence["#E2"].content == "2"
    assert result.model_calls == 4 and result.subruns[0].name == "sub"


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sub_agent_with_output_type_hands_its_caller_the_output_as_json(driver: str) -> None:
    from agentloops.testing import respond_structured

    class City(pydantic.BaseModel):
        name: str

    inner = ReActLoop(ScriptedModel([respond_structured({"name": "Paris"})]), [], output_type=City)
    outer = ReActLoop(
        ScriptedModel([use_tools(("geo", {"task": "The capital of France?"})), "Paris."]),
        [inner.as_tool("geo", "Answers geography questions.")],
    )
    result = drive(outer, "Where?", driver)
    assert result.messages[2].tool_results[0].content == '{"name":"Paris"}'
    assert result.subruns[0].stop_reason == "answered" and result.model_calls == 3


def test_a_tools_retries_are_counted_in_a_loop_with_agent_tools() -> None:
    from agentloops import ModelRetry

    @tool(retries=0)
    def lookup(q: str) -> str:
        """Look something up."""
        raise ModelRetry("ask for a city")

    sub = sub_loop("react").as_tool("sub", "Adds numbers.")
    calls_ = [ToolCall("a", "lookup", {"q": "x"}), ToolCall("b", "sub", {"task": "2 + 3"})]
    outer = ReActLoop(ScriptedModel([use_tools(*calls_), "done"]), [sub, lookup])
    result = outer.run("go")
    (seen,) = [r for r in result.messages[2].tool_results if r.call_id == "a"]
    assert seen.is_error and "its retries are spent (retries=0)" in seen.content
