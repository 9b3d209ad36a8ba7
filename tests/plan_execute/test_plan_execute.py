"""PlanAndExecute on scripted models: the flow, digests, limits, re-planning, events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    JSONLSink,
    ModelError,
    ModelOutputError,
    ModelRefused,
    OutputTruncated,
    Plan,
    PlanMade,
    PlanStep,
    PlanValidationError,
    Replanned,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    Usage,
    tool,
)
from agentloops.plan_execute import (
    EXECUTOR_SYSTEM,
    PLANNER_SYSTEM,
    REPLANNER_SYSTEM,
    REPORTER_SYSTEM,
    plan_problems,
)
from agentloops.testing import ScriptedModel, respond, respond_structured, use_tools

U = Usage(input_tokens=10, output_tokens=2)


def plan_of(*descriptions: str) -> Any:
    steps = [{"step_number": n, "description": d} for n, d in enumerate(descriptions, 1)]
    return respond_structured({"steps": steps}, usage=U)


def market_tools() -> tuple[list[Any], dict[str, int]]:
    ran = {"price": 0, "news": 0}

    @tool
    def price(ticker: str) -> str:
        """The latest price of a ticker."""
        ran["price"] += 1
        return f"raw quote feed: {ticker}=42.00 USD (exchange XNYS, tick 8812)"

    @tool
    def news(ticker: str) -> str:
        """Headlines about a ticker."""
        ran["news"] += 1
        return f"wire: {ticker} agrees merger with Globex"

    return [price, news], ran


def two_step_models() -> tuple[ScriptedModel, ScriptedModel, ScriptedModel]:
    planner = ScriptedModel([plan_of("Find ACME's price", "Find ACME's news")])
    executor = ScriptedModel(
        [
            use_tools(("price", {"ticker": "ACME"}), usage=U),
            respond("ACME trades at 42 USD.", usage=U),
            use_tools(("news", {"ticker": "ACME"}), usage=U),
            respond("ACME is merging with Globex.", usage=U),
        ]
    )
    reporter = ScriptedModel([respond("ACME: 42 USD, merging with Globex.", usage=U)])
    return planner, executor, reporter


def test_whole_flow_with_exact_model_calls(PlanAndExecute) -> None:
    planner, executor, reporter = two_step_models()
    tools, ran = market_tools()
    agent = PlanAndExecute(planner, tools, executor=executor, reporter=reporter)
    result = agent.run("Brief me on ACME.", run_id="flow")
    assert result.stop_reason == "answered"
    assert result.answer == "ACME: 42 USD, merging with Globex."
    assert result.step_results == ["ACME trades at 42 USD.", "ACME is merging with Globex."]
    assert result.step_status == ["done", "done"]
    assert [s.description for s in result.plan.steps] == ["Find ACME's price", "Find ACME's news"]
    assert (planner.calls, executor.calls, reporter.calls) == (1, 4, 1)
    assert result.model_calls == 6
    assert result.usage == Usage(input_tokens=60, output_tokens=12)
    assert result.tool_calls == 2
    assert ran == {"price": 1, "news": 1}
    assert result.run_id == "flow"
    result.raise_for_stop()
    for model in (planner, executor, reporter):
        model.assert_complete()


def test_each_role_has_its_stable_system_prompt_and_the_reporter_sees_all_results(
    PlanAndExecute,
) -> None:
    planner, executor, reporter = two_step_models()
    tools, _ = market_tools()
    PlanAndExecute(planner, tools, executor=executor, reporter=reporter).run("Brief me on ACME.")
    assert planner.requests[0].system == PLANNER_SYSTEM
    assert PLANNER_SYSTEM.startswith("You are the planner of a Plan-and-Execute agent.")
    assert all(r.system == EXECUTOR_SYSTEM for r in executor.requests)
    assert EXECUTOR_SYSTEM.startswith("You are the executor of a Plan-and-Execute agent.")
    assert REPORTER_SYSTEM.startswith("You are the reporter of a Plan-and-Execute agent.")
    assert REPLANNER_SYSTEM.startswith("You are the replanner of a Plan-and-Execute agent.")
    planning = planner.requests[0].messages[0].text
    assert "Brief me on ACME." in planning
    assert "- price: The latest price of a ticker." in planning
    assert planner.requests[0].output is not None  # structured, through ask_structured
    [report] = reporter.requests
    assert report.system == REPORTER_SYSTEM
    assert report.tools == []
    text = report.messages[0].text
    assert "ACME trades at 42 USD." in text
    assert "ACME is merging with Globex." in text
    assert "tick 8812" not in text  # tool transcripts stay inside their step


def test_system_prompts_can_be_overridden(PlanAndExecute) -> None:
    planner, executor, reporter = two_step_models()
    tools, _ = market_tools()
    PlanAndExecute(
        planner,
        tools,
        executor=executor,
        reporter=reporter,
        planner_system="P",
        executor_system="E",
        reporter_system="R",
    ).run("Brief me on ACME.")
    assert planner.requests[0].system == "P"
    assert {r.system for r in executor.requests} == {"E"}
    assert reporter.requests[0].system == "R"


def test_a_step_starts_from_a_digest_not_from_earlier_transcripts(PlanAndExecute) -> None:
    planner, executor, reporter = two_step_models()
    tools, _ = market_tools()
    PlanAndExecute(planner, tools, executor=executor, reporter=reporter).run("Brief me on ACME.")
    first_of_step_1, first_of_step_2 = executor.requests[0], executor.requests[2]
    assert len(first_of_step_2.messages) == 1  # a fresh transcript
    opening = first_of_step_2.messages[0].text
    assert "Find ACME's news" in opening
    assert "ACME trades at 42 USD." in opening  # step 1's finding
    assert "tick 8812" not in opening  # not step 1's tool output
    assert "Brief me on ACME." in opening
    assert "(none yet" in first_of_step_1.messages[0].text


def test_the_digest_cuts_long_findings(PlanAndExecute) -> None:
    planner = ScriptedModel([plan_of("one", "two")])
    executor = ScriptedModel(["x" * 5000, "done", "report"])
    PlanAndExecute(planner, executor=executor, reporter=executor, max_digest_chars=100).run("t")
    opening = executor.requests[1].messages[0].text
    assert "x" * 100 + " [... 4900 characters cut]" in opening
    assert "x" * 101 not in opening


def test_a_step_at_its_limit_is_incomplete_and_the_run_goes_on(PlanAndExecute) -> None:
    tools, ran = market_tools()
    events: list[Any] = []
    model = ScriptedModel(
        [
            plan_of("Find the price", "Find the news"),
            use_tools(("price", {"ticker": "A"})),
            use_tools(("price", {"ticker": "B"})),
            "Merger news.",
            "Report: price unknown; merger news.",
        ]
    )
    agent = PlanAndExecute(model, tools, max_step_iterations=2, on_event=events.append)
    result = agent.run("Brief me.")
    assert result.stop_reason == "answered"
    assert result.step_status == ["incomplete", "done"]
    assert result.step_results[0].startswith("[incomplete: max_step_iterations")
    assert "B=42.00" in result.step_results[0]  # the last observation is kept
    assert ran["price"] == 2
    report = model.requests[-1].messages[0].text
    assert "Step 1 [incomplete]" in report
    assert "[incomplete: max_step" in report
    finished = [e for e in events if isinstance(e, StepFinished)]
    assert [(e.step_id, e.ok) for e in finished] == [("1", False), ("2", True)]
    assert model.calls == 5


def test_a_refusing_step_is_incomplete_and_keeps_its_words(PlanAndExecute) -> None:
    model = ScriptedModel(
        [plan_of("one", "two"), respond("I won't do that.", stop_reason="refusal"), "2", "r"]
    )
    result = PlanAndExecute(model).run("t")
    assert result.step_status == ["incomplete", "done"]
    assert result.step_results[0] == "[incomplete: model stop_reason=refusal] I won't do that."


@pytest.mark.parametrize(
    ("steps", "problems"),
    [
        ([], ["the plan has no steps"]),
        ([(1, "a"), (2, "b"), (3, "c")], ["the plan has 3 steps; max_plan_steps=2"]),
        ([(1, "a"), (1, "b")], ["step number 1 is used 2 times"]),
        ([(1, "a"), (2, "  ")], ["step 2: the description is blank"]),
        (
            [(4, ""), (4, "b"), (5, "c")],
            [
                "the plan has 3 steps; max_plan_steps=2",
                "step number 4 is used 2 times",
                "step 4: the description is blank",
            ],
        ),
    ],
)
def test_an_invalid_plan_names_every_problem_before_anything_runs(
    steps: list[tuple[int, str]], problems: list[str], PlanAndExecute
) -> None:
    plan = {"steps": [{"step_number": n, "description": d} for n, d in steps]}
    model = ScriptedModel([respond_structured(plan)])
    tools, ran = market_tools()
    with pytest.raises(PlanValidationError) as caught:
        PlanAndExecute(model, tools, max_plan_steps=2).run("t")
    assert caught.value.problems == problems
    assert caught.value.plan == Plan.model_validate(plan)
    assert caught.value.result.stop_reason == "invalid_plan"  # as in ReWOO
    assert caught.value.result.model_calls == 1
    assert ran == {"price": 0, "news": 0}
    assert plan_problems(Plan.model_validate(plan), max_steps=2) == problems


def test_an_invalid_plan_goes_back_to_the_planner_when_replanning_is_on(PlanAndExecute) -> None:
    events: list[Any] = []
    model = ScriptedModel([plan_of(), plan_of("only step"), "found", "report"])
    result = PlanAndExecute(model, replan=True, on_event=events.append).run("t")
    assert result.stop_reason == "answered"
    assert result.replans == 1
    assert "Your previous plan was rejected" in model.requests[1].messages[0].text
    assert "the plan has no steps" in model.requests[1].messages[0].text
    [replanned] = [e for e in events if isinstance(e, Replanned)]
    assert (replanned.attempt, replanned.problems) == (1, ["the plan has no steps"])


def test_a_huge_rejected_plan_goes_back_to_the_planner_cut(PlanAndExecute) -> None:
    from agentloops.plan_execute.prompts import MAX_REJECTED_PLAN

    model = ScriptedModel([plan_of(*["x" * 5000] * 9), plan_of("only step"), "found", "report"])
    assert PlanAndExecute(model, replan=True).run("t").stop_reason == "answered"
    prompt = model.requests[1].messages[0].text
    assert "characters of the plan cut" in prompt and "max_plan_steps=8" in prompt
    assert len(prompt) < MAX_REJECTED_PLAN + 2000


def test_rejected_plans_are_bounded_by_max_replans(PlanAndExecute) -> None:
    model = ScriptedModel([plan_of(), plan_of()])
    with pytest.raises(PlanValidationError):
        PlanAndExecute(model, replan=True, max_replans=1).run("t")
    assert model.calls == 2


def test_steps_run_in_step_number_order(PlanAndExecute) -> None:
    plan = {
        "steps": [{"step_number": 2, "description": "b"}, {"step_number": 1, "description": "a"}]
    }
    model = ScriptedModel([respond_structured(plan), "A", "B", "report"])
    result = PlanAndExecute(model).run("t")
    assert [s.description for s in result.plan.steps] == ["a", "b"]
    assert "Your step (1 of 2): a" in model.requests[1].messages[0].text


def test_garbage_from_the_planner_is_a_model_output_error_after_its_retries(PlanAndExecute) -> None:
    model = ScriptedModel(["not json", "still not json"])
    with pytest.raises(ModelOutputError) as caught:
        PlanAndExecute(model, max_retries=1).run("t")
    assert caught.value.result.model_calls == 2
    assert caught.value.result.stop_reason == "error"


def test_a_failing_step_counts_what_it_spent(PlanAndExecute) -> None:
    tools, _ = market_tools()
    turn = use_tools(("price", {"ticker": "A"}), usage=U)
    model = ScriptedModel([plan_of("one"), turn, ModelError("down")])
    with pytest.raises(ModelError) as caught:
        PlanAndExecute(model, tools).run("t")
    partial = caught.value.result
    assert (partial.model_calls, partial.tool_calls, partial.usage) == (2, 1, U + U)
    assert partial.step_status == ["pending"]


def revise(*descriptions: str, revise: bool = True) -> Any:
    steps = [{"step_number": n, "description": d} for n, d in enumerate(descriptions, 1)]
    return respond_structured({"revise": revise, "steps": steps, "reason": "new facts"})


def test_replanning_revises_the_remaining_steps_and_is_bounded(PlanAndExecute) -> None:
    events: list[Any] = []
    model = ScriptedModel(
        [
            plan_of("one", "two", "three"),
            "found one",
            revise("new two", "new three"),  # replans = 1 = max: no more replanner calls
            "found new two",
            "found new three",
            "report",
        ]
    )
    agent = PlanAndExecute(model, replan=True, max_replans=1, on_event=events.append)
    result = agent.run("t")
    assert [(s.step_number, s.description) for s in result.plan.steps] == [
        (1, "one"),
        (2, "new two"),
        (3, "new three"),
    ]
    assert result.step_results == ["found one", "found new two", "found new three"]
    assert result.replans == 1
    assert model.calls == 6
    assert model.requests[2].system == REPLANNER_SYSTEM
    assert "found one" in model.requests[2].messages[0].text
    assert "2. two" in model.requests[2].messages[0].text
    assert [(e.attempt, e.problems) for e in events if isinstance(e, Replanned)] == [
        (1, ["new facts"])
    ]


def test_keeping_the_plan_does_not_spend_a_replan(PlanAndExecute) -> None:
    keep = revise(revise=False)
    model = ScriptedModel([plan_of("one", "two", "three"), "1", keep, "2", keep, "3", "report"])
    result = PlanAndExecute(model, replan=True, max_replans=1).run("t")
    assert result.replans == 0
    assert [s.description for s in result.plan.steps] == ["one", "two", "three"]
    assert model.calls == 7  # the replanner is asked after steps 1 and 2, not after the last


def test_an_empty_revision_drops_the_remaining_steps(PlanAndExecute) -> None:
    model = ScriptedModel([plan_of("one", "two"), "all found", revise(), "report"])
    result = PlanAndExecute(model, replan=True).run("t")
    assert [s.description for s in result.plan.steps] == ["one"]
    assert result.step_results == ["all found"]
    assert model.calls == 4


def test_an_invalid_revision_is_rejected_and_the_plan_kept(PlanAndExecute) -> None:
    events: list[Any] = []
    model = ScriptedModel([plan_of("one", "two"), "1", revise("a", "b", "c"), "2", "report"])
    result = PlanAndExecute(model, replan=True, max_plan_steps=3, on_event=events.append).run("t")
    assert [s.description for s in result.plan.steps] == ["one", "two"]
    assert result.replans == 1
    [replanned] = [e for e in events if isinstance(e, Replanned)]
    assert replanned.problems == [
        "revision rejected, the plan is kept: the plan has 4 steps; max_plan_steps=3"
    ]


def test_events_frame_the_run_and_steps_pass_them_down(PlanAndExecute) -> None:
    events: list[Any] = []
    planner, executor, reporter = two_step_models()
    tools, _ = market_tools()
    agent = PlanAndExecute(
        planner, tools, executor=executor, reporter=reporter, on_event=events.append
    )
    agent.run("Brief me on ACME.", run_id="ev")
    mine = [type(e).__name__ for e in events if e.loop == "plan_execute" and e.run_id == "ev"]
    framing = [n for n in mine if not n.startswith("ModelCall")]
    assert framing == [
        "RunStarted",
        "PlanMade",
        "StepStarted",
        "StepFinished",
        "StepStarted",
        "StepFinished",
        "RunFinished",
    ]
    assert mine.count("ModelCallFinished") == 2  # planner and reporter
    [made] = [e for e in events if isinstance(e, PlanMade)]
    assert isinstance(made.plan, Plan)
    steps = [e for e in events if isinstance(e, StepStarted)]
    assert [(e.step_id, e.description) for e in steps] == [
        ("1", "Find ACME's price"),
        ("2", "Find ACME's news"),
    ]
    tool_runs = {e.run_id for e in events if isinstance(e, ToolCallFinished)}
    assert tool_runs == {"ev.1", "ev.2"}  # each step's ReAct loop has its own run id
    step_starts = [e for e in events if isinstance(e, RunStarted) and e.loop == "react"]
    assert [(e.run_id, e.parent_run_id) for e in step_starts] == [("ev.1", "ev"), ("ev.2", "ev")]
    [finished] = [e for e in events if isinstance(e, RunFinished) and e.loop == "plan_execute"]
    assert (finished.stop_reason, finished.model_calls) == ("answered", 6)


def test_events_serialise_to_jsonl(tmp_path: Path, PlanAndExecute) -> None:
    planner, executor, reporter = two_step_models()
    tools, _ = market_tools()
    with JSONLSink(tmp_path / "events.jsonl") as sink:
        agent = PlanAndExecute(planner, tools, executor=executor, reporter=reporter, on_event=sink)
        agent.run("Brief me on ACME.", run_id="j")
    lines = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    [made] = [e for e in lines if e["event"] == "PlanMade"]
    assert made["plan"]["steps"][0] == {
        "step_number": 1,
        "description": "Find ACME's price",
        "tool_hint": None,
    }
    assert lines[-1]["event"] == "RunFinished"
    assert lines[-1]["loop"] == "plan_execute"


@pytest.mark.parametrize(
    ("model_stop", "run_stop", "error"),
    [
        ("refusal", "refused", ModelRefused),
        ("max_tokens", "max_tokens", OutputTruncated),
        ("context_window", "context_window", OutputTruncated),
    ],
)
def test_a_report_that_stops_short_is_not_an_answer(
    model_stop: Any, run_stop: str, error: type[Exception], PlanAndExecute
) -> None:
    model = ScriptedModel([plan_of("one"), "x", respond("I can't.", stop_reason=model_stop)])
    result = PlanAndExecute(model).run("t")
    assert result.stop_reason == run_stop
    with pytest.raises(error, match=model_stop) as caught:
        result.raise_for_stop()
    assert caught.value.result is result  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_plan_steps", 0),
        ("max_step_iterations", 0),
        ("max_replans", -1),
        ("max_retries", -1),
        ("max_digest_chars", 10),
    ],
)
def test_bad_limits_are_configuration_errors(option: str, value: int, PlanAndExecute) -> None:
    with pytest.raises(ValueError, match=option):
        PlanAndExecute(ScriptedModel([]), **{option: value})


def test_plan_step_defaults() -> None:
    assert PlanStep(step_number=1, description="d").tool_hint is None


def test_without_a_checkpointer_a_failed_run_resumes_in_process(PlanAndExecute) -> None:
    events: list[Any] = []
    tools, ran = market_tools()
    planner = ScriptedModel([plan_of("Find ACME's price", "Find ACME's news")])
    executor = ScriptedModel(
        [
            use_tools(("price", {"ticker": "ACME"})),
            respond("ACME trades at 42 USD."),
            ModelError("overloaded", status=529),  # step 2's first call fails
            use_tools(("news", {"ticker": "ACME"})),
            respond("ACME is merging with Globex."),
        ]
    )
    reporter = ScriptedModel(["ACME: 42 USD, merging."])
    agent = PlanAndExecute(
        planner, tools, executor=executor, reporter=reporter, on_event=events.append
    )
    with pytest.raises(ModelError) as caught:
        agent.run("Brief me on ACME.", run_id="r")
    assert caught.value.result.stop_reason == "error"  # type: ignore[attr-defined]
    finished = [e for e in events if isinstance(e, RunFinished) and e.loop == "plan_execute"]
    assert [e.stop_reason for e in finished] == ["error"]
    result = agent.resume("r")
    assert result.stop_reason == "answered" and ran == {"price": 1, "news": 1}
