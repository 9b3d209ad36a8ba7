"""The ReWOO plan schema: derived `depends_on`, and validation that stays fast and bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agentloops import PlanValidationError, ReWOOPipeline, ReWOOPlan, tool, validate_plan
from agentloops.plan_execute.schema import Plan, PlanStep, plan_problems
from agentloops.rewoo import PLANNER_SYSTEM
from agentloops.testing import ScriptedModel

finished: dict[str, float] = {}
started: dict[str, float] = {}
_lock = threading.Lock()


@tool
def fetch(query: str) -> str:
    """Fetch a fact."""
    with _lock:
        started[query] = time.monotonic()
    time.sleep(0.02)
    with _lock:
        finished[query] = time.monotonic()
    return f"fact about {query}"


@tool
def join(a: str, b: str) -> str:
    """Join two texts."""
    return f"{a} + {b}"


TOOLS = [fetch, join]


def step(sid: str, tool_name: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"step_id": sid, "description": "d", "tool_name": tool_name, "tool_args": args, **extra}


def plan_of(*steps: dict[str, Any]) -> ReWOOPlan:
    return ReWOOPlan.model_validate({"steps": list(steps)})


def problems_of(plan: ReWOOPlan | dict[str, Any], max_steps: int = 20) -> list[str]:
    with pytest.raises(PlanValidationError) as info:
        validate_plan(plan, TOOLS, max_steps=max_steps)
    return info.value.problems


# -- depends_on derived from the placeholders -----------------------------------------


def test_an_omitted_depends_on_is_the_placeholders_in_order():
    plan = plan_of(
        step("#E1", "fetch", {"query": "x"}),
        step("#E2", "fetch", {"query": "y"}),
        step("#E3", "join", {"a": "#E2 and #E1", "b": "#E2"}),
        step("#E4", "join", {"a": "#E3", "b": "plain"}, depends_on=None),
    )
    assert [s.depends_on for s in plan.steps] == [[], [], ["#E2", "#E1"], ["#E3"]]
    assert ["depends_on" in s.model_fields_set for s in plan.steps] == [False] * 4
    validate_plan(plan, TOOLS)


def test_a_plan_without_depends_on_runs_in_dependency_order():
    plan = plan_of(
        step("#E1", "fetch", {"query": "cats"}),
        step("#E2", "join", {"a": "#E1", "b": "dogs"}),
    )
    evidence = ReWOOPipeline(ScriptedModel([]), TOOLS).work(plan)
    assert evidence["#E2"].content == "fact about cats + dogs"


def test_an_explicit_list_may_add_an_ordering_only_dependency():
    plan = plan_of(
        step("#E1", "fetch", {"query": "first"}),
        step("#E2", "fetch", {"query": "second"}, depends_on=["#E1"]),
    )
    validate_plan(plan, TOOLS)
    ReWOOPipeline(ScriptedModel([]), TOOLS).work(plan)
    assert started["second"] >= finished["first"]  # it waited without using the output


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (
            [
                step("#E1", "fetch", {"query": "x"}),
                step("#E2", "join", {"a": "#E1", "b": "c"}, depends_on=[]),
            ],
            ["#E2: tool_args use #E1, but depends_on does not list it"],
        ),
        (
            [
                step("#E1", "fetch", {"query": "x"}),
                step("#E2", "fetch", {"query": "y"}),
                step("#E3", "join", {"a": "#E1", "b": "#E2"}, depends_on=["#E1"]),
            ],
            ["#E3: tool_args use #E2, but depends_on does not list it"],
        ),
        (  # derived: an unknown placeholder is reported once, not again as a dependency
            [step("#E1", "join", {"a": "#E7", "b": "x"})],
            ["#E1: tool_args use #E7, which is no step of the plan"],
        ),
        (  # derived: never a self-dependency; the own output is the problem
            [step("#E1", "join", {"a": "#E1", "b": "x"})],
            ["#E1: tool_args use its own output #E1"],
        ),
        (  # derived dependencies can still form a cycle
            [
                step("#E1", "join", {"a": "#E2", "b": "x"}),
                step("#E2", "join", {"a": "#E1", "b": "y"}),
            ],
            ["dependency cycle #E1 -> #E2 -> #E1: none of these steps can start"],
        ),
    ],
    ids=["explicit-empty", "explicit-partial", "unknown", "own-output", "cycle"],
)
def test_what_is_still_a_problem(steps, expected):
    assert problems_of(plan_of(*steps)) == expected


def test_a_dumped_plan_reloads_with_its_derived_list_as_an_explicit_one():
    plan = plan_of(
        step("#E1", "fetch", {"query": "x"}), step("#E2", "join", {"a": "#E1", "b": "y"})
    )
    again = ReWOOPlan.model_validate(plan.model_dump())
    assert again == plan and "depends_on" in again.steps[1].model_fields_set
    validate_plan(again, TOOLS)


def test_the_planner_is_told_depends_on_is_optional():
    schema = ReWOOPlan.model_json_schema()
    step_schema = schema["$defs"]["ReWOOPlanStep"]
    assert "depends_on" not in step_schema["required"]
    assert "leave it out" in step_schema["properties"]["depends_on"]["description"]
    assert "depends_on is optional" in PLANNER_SYSTEM


# -- validation is linear and its problem list bounded ---------------------------------


def test_thousands_of_duplicate_ids_give_a_bounded_list_that_counts_the_rest():
    steps = [step(f"#E{i // 2 + 1}", "fetch", {"query": "q"}) for i in range(5000)]
    problems = problems_of(plan_of(*steps))
    # 2,500 duplicated ids and one oversized plan: 2,501 problems, 50 listed
    assert len(problems) == 51
    assert problems[0] == "the plan has 5000 steps; max_steps=20"
    assert problems[1] == "step_id '#E1' is used by 2 steps (positions 1, 2)"
    assert problems[-1] == "... and 2451 more problems not listed; fix these first"


def test_one_id_used_thousands_of_times_lists_a_few_positions():
    steps = [step("#E1", "fetch", {"query": "q"}) for _ in range(5000)]
    problems = problems_of(plan_of(*steps), max_steps=10_000)
    assert problems == [
        "step_id '#E1' is used by 5000 steps (positions 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... "
        "(5000 in all))"
    ]


def test_long_names_and_ids_are_cut_in_each_problem():
    huge = "#E" + "9" * 100_000
    plan = plan_of(
        step(huge, "x" * 100_000, {"query": "#E" + "7" * 100_000}, depends_on=["y" * 100_000])
    )
    problems = problems_of(plan)
    assert len(problems) == 3 and all(len(p) <= 200 for p in problems), problems


def test_many_bad_arguments_make_one_problem_of_bounded_length():
    plan = plan_of(step("#E1", "join", {f"k{i}": i for i in range(5000)}))
    [problem] = problems_of(plan)
    assert problem.startswith("#E1: tool_args fail 'join'") and len(problem) <= 500


def test_plan_and_execute_plan_problems_are_bounded_too():
    plan = Plan(steps=[PlanStep(step_number=i // 2, description=" ") for i in range(10_000)])
    problems = plan_problems(plan, max_steps=8)
    # 1 oversized + 5,000 duplicate numbers + 10,000 blank descriptions
    assert len(problems) == 51
    assert problems[:2] == [
        "the plan has 10000 steps; max_plan_steps=8",
        "step number 0 is used 2 times",
    ]
    assert problems[-1] == "... and 14951 more problems not listed; fix these first"


def test_a_replan_prompt_quotes_a_huge_rejected_plan_cut() -> None:
    from agentloops.rewoo.prompts import MAX_PREVIOUS_PLAN, planner_prompt

    prompt = planner_prompt("task", "x" * 200_000, ["a problem"])
    assert len(prompt) < MAX_PREVIOUS_PLAN + 500
    assert "characters of the plan cut" in prompt and "- a problem" in prompt
