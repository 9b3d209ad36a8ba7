import dataclasses
import pickle
import threading
from typing import Annotated, Any, Literal

import pydantic
import pytest

from agentloops import (
    ConfigurationError,
    ModelRetry,
    ReActLoop,
    ReWOOPipeline,
    ReWOOPlan,
    Tool,
    ToolOptions,
    ToolRegistry,
    tool,
    validate_plan,
)
from agentloops.messages import ToolOutcome, _outcome
from agentloops.testing import ScriptedModel, use_tools


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number,
            defaulting to two

    Returns:
        The sum.
    """
    return a + b


@tool(name="shout", read_only=False, requires_approval=True, timeout=5)
def loud(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def plain(city: str, unit: Literal["C", "F"] = "C") -> dict[str, object]:
    """Weather for a city."""
    return {"city": city, "temp": 21, "unit": unit}


class Point(pydantic.BaseModel):
    x: int
    y: int


def takes_model(p: Point, tags: Annotated[list[str], pydantic.Field(max_length=2)]) -> Point:
    """Move a point."""
    return Point(x=p.x + 1, y=p.y + len(tags))


def test_schema_and_description_from_hints_and_docstring():
    assert add.name == "add"
    assert add.description == "Add two integers."
    schema = add.input_schema
    assert schema["required"] == ["a"]
    assert schema["properties"]["a"] == {
        "type": "integer",
        "title": "A",
        "description": "the first number",
    }
    assert schema["properties"]["b"]["default"] == 2
    assert schema["properties"]["b"]["description"] == "the second number, defaulting to two"
    assert schema["additionalProperties"] is False
    assert "title" not in schema


def test_options_and_callable():
    assert (loud.name, loud.read_only, loud.requires_approval, loud.timeout) == (
        "shout",
        False,
        True,
        5,
    )
    assert add(1, b=5) == 6  # still callable like the function
    assert repr(add) == "Tool('add')"
    assert add.spec().name == "add"


@pytest.mark.parametrize(
    ("fn", "kwargs", "fragment"),
    [
        (lambda x: x, {"name": "nohints"}, "needs a type hint"),
        (lambda *a: a, {"name": "varargs"}, r"\*args"),
        (plain, {"name": "bad name!"}, "must match"),
        (plain, {"timeout": 0}, "timeout must be > 0"),
    ],
)
def test_configuration_errors(fn, kwargs, fragment):
    with pytest.raises(ConfigurationError, match=fragment):
        Tool.from_function(fn, **kwargs)


OPTIONS: dict[str, Any] = {
    "name": "weather",
    "description": "The weather.",
    "read_only": False,
    "requires_approval": True,
    "timeout": 3.0,
    "concurrent": False,
    "on_doubt": "fail",
    "retries": 3,
    "cache": None,  # a ToolCache is for read-only tools (tests/tools/test_cache.py)
}


def _options(t: Tool) -> dict[str, Any]:
    return {name: getattr(t, name) for name in OPTIONS}


def test_the_options_are_one_set_taken_alike_by_every_way_to_build_a_tool():
    assert set(OPTIONS) == set(ToolOptions.__annotations__)
    built = [
        tool(plain, **OPTIONS),
        tool(**OPTIONS)(plain),
        Tool.from_function(plain, **OPTIONS),
        Tool(plain, **OPTIONS),
        pickle.loads(pickle.dumps(Tool(plain, **OPTIONS))),  # rebuilt by value
    ]
    assert [_options(t) for t in built] == [OPTIONS] * len(built)
    defaults = [tool(plain), tool()(plain), Tool.from_function(plain), Tool(plain)]
    assert len({tuple(_options(t).values()) for t in defaults}) == 1
    assert _options(defaults[0]) == {
        "name": "plain",
        "description": plain.__doc__,
        "read_only": True,
        "requires_approval": False,
        "timeout": None,
        "concurrent": True,
        "on_doubt": "rerun",
        "retries": 1,
        "cache": None,
    }


@pytest.mark.parametrize("build", [tool, Tool.from_function, Tool])
def test_an_unknown_tool_option_is_refused_by_every_way_to_build_a_tool(build):
    with pytest.raises(TypeError, match=r"unknown tool options \['raed_only'\]"):
        build(plain, raed_only=False)


def test_an_unknown_on_doubt_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="on_doubt must be"):
        tool(plain, on_doubt="maybe")  # type: ignore[typeddict-item]


def test_unresolvable_hint_is_a_configuration_error():
    def f(x: "Nope") -> int:  # type: ignore[name-defined]  # noqa: F821
        return 1

    with pytest.raises(ConfigurationError, match="cannot resolve"):
        Tool.from_function(f)


def test_registry_basics():
    registry = ToolRegistry([add, plain])
    assert registry.names == ["add", "plain"]
    assert "plain" in registry and "nope" not in registry
    assert len(registry) == 2 and [t.name for t in registry] == ["add", "plain"]
    specs = registry.specs()
    assert registry.specs() is specs  # cached
    registry.register(loud)
    assert [s.name for s in registry.specs()] == ["add", "plain", "shout"]
    assert registry.get("shout") is loud


def test_duplicate_names_and_non_callables_are_rejected():
    with pytest.raises(ConfigurationError, match="duplicate tool name 'add'"):
        ToolRegistry([add, Tool.from_function(plain, name="add")])
    with pytest.raises(ConfigurationError, match="not a tool"):
        ToolRegistry([42])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="max_output_chars"):
        ToolRegistry(max_output_chars=10)


def test_call_success_converts_output_to_text():
    registry = ToolRegistry([add, plain, takes_model])
    assert registry.call("add", {"a": 1}).content == "3"
    out = registry.call("plain", {"city": "Oslo"})
    assert out.content == '{"city": "Oslo", "temp": 21, "unit": "C"}' and not out.is_error
    assert out.seconds >= 0
    moved = registry.call("takes_model", {"p": {"x": 1, "y": 1}, "tags": ["a"]})
    assert moved.content == '{"x":2,"y":2}'


def test_outcomes_built_on_the_hot_path_are_ordinary_frozen_outcomes():
    built, expected = _outcome("3", True, 0.5), ToolOutcome(content="3", is_error=True, seconds=0.5)
    assert type(built) is ToolOutcome and built == expected and hash(built) == hash(expected)
    assert repr(built) == repr(expected) and pickle.loads(pickle.dumps(built)) == expected
    for f in dataclasses.fields(ToolOutcome):  # every field set, none writable
        assert getattr(built, f.name) == getattr(expected, f.name)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(built, f.name, None)
    with pytest.raises(TypeError):  # the class itself stays keyword-only
        ToolOutcome("3")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "args", "fragments"),
    [
        ("nope", {}, ["unknown tool 'nope'", "available tools: add, plain"]),
        ("add", {}, ["invalid arguments for 'add'", "a: Field required"]),
        ("add", {"a": "x"}, ["a: Input should be a valid integer", "(got 'x')"]),
        ("add", {"a": 1, "c": 3}, ["c: Extra inputs are not permitted"]),
        ("plain", {"city": "x", "unit": "K"}, ["unit: Input should be 'C' or 'F'"]),
        ("add", ["not", "a", "dict"], ["must be a JSON object"]),
    ],
)
def test_bad_calls_become_error_outcomes(name, args, fragments):
    outcome = ToolRegistry([add, plain]).call(name, args)
    assert outcome.is_error
    for fragment in fragments:
        assert fragment in outcome.content


def test_exception_becomes_error_without_traceback():
    def boom(x: int) -> int:
        raise ValueError(f"bad x={x}")

    outcome = ToolRegistry([boom]).call("boom", {"x": 3})
    assert outcome.is_error
    assert outcome.content == "'boom' failed: ValueError: bad x=3"
    assert "Traceback" not in outcome.content


def test_base_exceptions_propagate():
    class Crash(BaseException):
        pass

    def dies() -> None:
        raise Crash

    with pytest.raises(Crash):
        ToolRegistry([dies]).call("dies", {})


def test_timeout_returns_while_the_tool_is_still_blocked():
    release = threading.Event()
    finished = threading.Event()

    def hang() -> str:
        release.wait(10)
        finished.set()
        return "late"

    registry = ToolRegistry([Tool.from_function(hang, timeout=0.05)])
    outcome = registry.call("hang", {})
    assert outcome.is_error and "timed out after 0.05 s" in outcome.content
    assert not finished.is_set()  # the caller was not held until the tool finished
    release.set()
    assert finished.wait(5)


def test_timeout_passes_results_and_errors_through():
    def quick(x: int) -> int:
        if x < 0:
            raise KeyError("neg")
        return x * 2

    registry = ToolRegistry([Tool.from_function(quick, timeout=5)])
    assert registry.call("quick", {"x": 2}).content == "4"
    assert "KeyError" in registry.call("quick", {"x": -1}).content


def test_over_long_output_is_cut_head_and_tail():
    def big() -> str:
        return "H" * 600 + "M" * 10_000 + "T" * 600

    outcome = ToolRegistry([big], max_output_chars=1000).call("big", {})
    assert outcome.is_error
    assert outcome.content.startswith("H" * 400) and outcome.content.endswith("T" * 400)
    assert "output too long" in outcome.content and "of 11200 characters cut" in outcome.content
    assert len(outcome.content) < 1200


def test_none_and_unserialisable_outputs():
    def nothing() -> None:
        return None

    def odd() -> object:
        return {1, 2}

    registry = ToolRegistry([nothing, odd])
    assert registry.call("nothing", {}).content == "(no output)"
    assert registry.call("odd", {}).content in ("{1, 2}", "{2, 1}")


def test_tools_pickle_by_reference_or_by_rebuild():
    assert pickle.loads(pickle.dumps(add)) is add
    rebuilt = pickle.loads(pickle.dumps(Tool.from_function(plain, name="weather", timeout=3)))
    assert (rebuilt.name, rebuilt.timeout) == ("weather", 3)
    assert rebuilt.input_schema == Tool.from_function(plain).input_schema


def test_a_circular_output_falls_back_to_its_text():
    def loop() -> list[object]:
        items: list[object] = []
        items.append(items)
        return items

    outcome = ToolRegistry([loop]).call("loop", {})
    assert not outcome.is_error and outcome.content == "[[...]]"


# -- a tool's failure is always a capped is_error outcome ------------------------------


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class NotAStr:
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]


class Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot read me")


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        (BadStr(), ["returned a BadStr that cannot be made text", "RuntimeError: no text for you"]),
        (NotAStr(), ["returned a NotAStr", "TypeError"]),
        (10**5000, ["returned a int", "ValueError", "digits"]),
        ({"k": BadStr(), "n": 10**5000}, ["returned a dict", "ValueError"]),
    ],
    ids=["str-raises", "str-not-a-str", "huge-int", "dict-of-both"],
)
def test_a_return_value_that_cannot_become_text_is_an_error_outcome(value, fragments):
    def odd() -> object:
        return value

    outcome = ToolRegistry([odd]).call("odd", {})
    assert outcome.is_error
    assert outcome.content.startswith("'odd' returned a ")
    for fragment in fragments:
        assert fragment in outcome.content


def test_json_that_fails_falls_back_to_the_values_text():
    def keyed() -> dict[object, str]:
        return {(1, 2): "pair", "k": "v"}

    outcome = ToolRegistry([keyed]).call("keyed", {})
    assert not outcome.is_error and outcome.content == "{(1, 2): 'pair', 'k': 'v'}"


def test_a_huge_exception_message_is_capped_like_any_output():
    def boom() -> None:
        raise ValueError("H" * 1000 + "x" * 50_000_000 + "T" * 1000)

    outcome = ToolRegistry([boom], max_output_chars=2000).call("boom", {})
    assert outcome.is_error and len(outcome.content) <= 2000
    assert outcome.content.startswith("'boom' failed: ValueError: HHHH")
    assert outcome.content.endswith("TTTT") and "50002000 characters" in outcome.content


def test_an_exception_whose_message_cannot_be_read_is_still_an_outcome():
    def boom() -> None:
        raise Unreadable

    outcome = ToolRegistry([boom]).call("boom", {})
    assert outcome.is_error
    assert outcome.content == (
        "'boom' failed: Unreadable: (its message could not be read: RuntimeError)"
    )


def test_error_texts_of_every_kind_are_capped():
    def many(xs: list[int]) -> int:
        return len(xs)

    registry = ToolRegistry([many], max_output_chars=500)
    invalid = registry.call("many", {"xs": ["nope"] * 10_000})
    assert invalid.is_error and len(invalid.content) <= 500 and "output too long" in invalid.content
    unknown = registry.call("x" * 100_000, {})
    assert unknown.is_error and len(unknown.content) <= 500


def test_one_unprintable_result_loses_no_sibling_result_in_a_loop():
    def good() -> str:
        return "fine"

    def bad() -> object:
        return BadStr()

    model = ScriptedModel([use_tools(("good", {}), ("bad", {})), "done"])
    result = ReActLoop(model, [good, bad]).run("go")
    assert result.stop_reason == "answered"
    [good_result, bad_result] = result.messages[2].tool_results
    assert (good_result.content, good_result.is_error) == ("fine", False)
    assert bad_result.is_error and "cannot be made text" in bad_result.content


# -- each call gets its own copy of its arguments ----------------------------------------


@tool
def scribble(items: list[dict[str, Any]], meta: Any) -> str:
    """A tool that rewrites whatever it is given (pydantic rebuilds typed containers, but
    what sits under `Any` it passes through as is)."""
    items[0]["tags"].append("seen")
    meta["owner"]["name"] = "mallory"
    meta.clear()
    return "scribbled"


def _args() -> dict[str, Any]:
    return {"items": [{"id": 1, "tags": ["a"]}], "meta": {"owner": {"name": "ann"}}}


def test_a_tool_that_mutates_its_arguments_cannot_reach_the_callers_dict():
    args = _args()
    assert ToolRegistry([scribble]).call("scribble", args).content == "scribbled"
    assert args == _args()


def test_a_mutating_tool_leaves_the_transcript_as_the_model_wrote_it():
    model = ScriptedModel([use_tools(("scribble", _args())), "done"])
    result = ReActLoop(model, [scribble]).run("go")
    assert result.messages[1].tool_calls[0].args == _args()
    assert model.requests[1].messages[1].tool_calls[0].args == _args()


def test_a_mutating_tool_leaves_what_a_human_approved_unchanged():
    approved = Tool.from_function(scribble.fn, requires_approval=True)
    model = ScriptedModel([use_tools(("scribble", _args())), "done"])
    loop = ReActLoop(model, [approved])
    paused = loop.run("go")
    [call] = paused.pending_approvals
    final = loop.resume(paused, {call.id: True})
    assert call.args == _args()
    assert final.messages[1].tool_calls[0].args == _args()


def test_a_mutating_tool_leaves_the_rewoo_plan_unchanged():
    plan = ReWOOPlan.model_validate(
        {
            "steps": [
                {
                    "step_id": "#E1",
                    "description": "d",
                    "tool_name": "scribble",
                    "tool_args": _args(),
                }
            ]
        }
    )
    evidence = ReWOOPipeline(ScriptedModel([]), [scribble]).work(plan)
    assert evidence["#E1"].content == "scribbled"
    assert plan.steps[0].tool_args == _args()


def test_arguments_that_cannot_be_copied_are_an_error_outcome():
    def takes(x: Any) -> str:
        return "ran"

    outcome = ToolRegistry([takes]).call("takes", {"x": threading.Lock()})
    assert outcome.is_error and outcome.content.startswith(
        "invalid arguments for 'takes': TypeError"
    )


# -- approval rules ------------------------------------------------------------------


def pay(amount: int, currency: str = "EUR") -> str:
    """Pay an amount."""
    return f"paid {amount} {currency}"


def above_limit(args: dict[str, Any]) -> bool:
    return args["amount"] > 1000 or args["currency"] != "EUR"


def test_needs_approval_is_a_flag_or_a_predicate_on_the_arguments():
    assert not Tool.from_function(pay).needs_approval({"amount": 5})
    assert Tool.from_function(pay, requires_approval=True).needs_approval({"amount": 5})
    guarded = Tool.from_function(pay, requires_approval=above_limit)
    assert not guarded.needs_approval({"amount": 50})  # the default currency is filled in
    assert guarded.needs_approval({"amount": 5000})
    assert guarded.needs_approval({"amount": 5, "currency": "USD"})
    assert not guarded.needs_approval({"amount": "50"})  # validated: the predicate sees 50


@pytest.mark.parametrize(
    ("rule", "args"),
    [
        (lambda args: args["missing"] > 1, {"amount": 5}),  # the predicate raises
        (lambda args: 1 / 0, {"amount": 5}),
        (above_limit, {"amount": "lots"}),  # arguments that fail validation
        (above_limit, {"amount": 5, "extra": 1}),
        (lambda args: BadBool(), {"amount": 5}),  # an answer that is not a bool and raises
    ],
)
def test_when_the_predicate_cannot_answer_the_call_asks(rule, args):
    assert Tool.from_function(pay, requires_approval=rule).needs_approval(args)


class BadBool:
    def __bool__(self) -> bool:
        raise ValueError("neither")


def test_a_predicate_cannot_change_the_arguments_it_judges():
    def meddle(args: dict[str, Any]) -> bool:
        args["tags"].append("evil")
        return False

    def tagged(tags: list[str]) -> str:
        return ",".join(tags)

    args = {"tags": ["a"]}
    assert not Tool.from_function(tagged, requires_approval=meddle).needs_approval(args)
    assert args == {"tags": ["a"]}


def test_requires_approval_must_be_a_bool_or_callable():
    with pytest.raises(ConfigurationError, match="requires_approval must be a bool or a predicate"):
        Tool.from_function(pay, requires_approval="yes")  # type: ignore[arg-type]


def test_a_predicate_tool_pickles_with_its_rule():
    rebuilt = pickle.loads(pickle.dumps(Tool.from_function(pay, requires_approval=above_limit)))
    assert rebuilt.requires_approval is above_limit
    assert rebuilt.needs_approval({"amount": 5000}) and not rebuilt.needs_approval({"amount": 5})


def test_a_loop_asks_for_a_predicate_tool_it_cannot_evaluate_yet():
    # Until the loops call needs_approval, a predicate is truthy: the call asks (safe).
    guarded = Tool.from_function(pay, requires_approval=above_limit)
    paused = ReActLoop(ScriptedModel([use_tools(("pay", {"amount": 5000}))]), [guarded]).run("pay")
    assert paused.stop_reason == "approval_required"


def test_rewoo_refuses_a_tool_that_may_need_approval():
    guarded = Tool.from_function(pay, requires_approval=above_limit)
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "d", "tool_name": "pay", "tool_args": {"amount": 5}}
        ]
    }
    with pytest.raises(Exception, match="requires human approval"):
        validate_plan(plan, [guarded])


class Loud(str):
    def __str__(self) -> str:
        raise RuntimeError("a str subclass whose __str__ raises")


class Opaque:
    def __str__(self) -> str:
        return "opaque"


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Loud("its characters"), "its characters"),  # a str subclass: its characters
        (Holder(thing=Opaque()), f"thing=<{__name__}.Opaque object at"),  # dump fails: str()
    ],
    ids=["str-subclass", "model-that-cannot-dump"],
)
def test_outputs_that_need_a_fallback_still_become_text(value, text):
    def give() -> object:
        return value

    outcome = ToolRegistry([give]).call("give", {})
    assert not outcome.is_error and outcome.content.startswith(text)


def test_a_huge_invalid_value_is_quoted_cut_in_the_error_the_model_reads():
    outcome = ToolRegistry([add]).call("add", {"a": "x" * 100_000, "b": 1})
    assert outcome.is_error and "a: Input should be a valid integer" in outcome.content
    assert "'xxx" in outcome.content and "[...]" in outcome.content
    assert len(outcome.content) < 300


# -- ModelRetry and retries ------------------------------------------------------------------


def asks_again(city: str) -> str:
    """Needs English names."""
    raise ModelRetry("use the English name")


@pytest.mark.parametrize("acall", [False, True])
def test_a_model_retry_is_an_error_outcome_carrying_its_message(acall: bool) -> None:
    import asyncio

    registry = ToolRegistry([Tool.from_function(asks_again, timeout=5)])
    if acall:
        outcome = asyncio.run(registry.acall("asks_again", {"city": "Köln"}))
    else:
        outcome = registry.call("asks_again", {"city": "Köln"})
    assert (outcome.content, outcome.is_error, outcome.retry) == (
        "use the English name",
        True,
        True,
    )
    assert not registry.call("nope", {}).retry  # every other failure is no retry


def test_a_model_retry_message_is_capped_like_any_output() -> None:
    def long(x: int) -> str:
        """Long."""
        raise ModelRetry("x" * 1000)

    outcome = ToolRegistry([long], max_output_chars=300).call("long", {"x": 1})
    assert outcome.retry and len(outcome.content) <= 300


@pytest.mark.parametrize("retries", [-1, 1.5, True, "2"])
def test_retries_must_be_a_whole_number_at_least_zero(retries: Any) -> None:
    with pytest.raises(ConfigurationError, match="retries must be an int >= 0"):
        Tool.from_function(asks_again, retries=retries)


def test_retries_default_to_one_and_survive_a_pickle() -> None:
    assert Tool.from_function(asks_again).retries == 1
    rebuilt = pickle.loads(pickle.dumps(Tool.from_function(asks_again, name="again", retries=3)))
    assert rebuilt.retries == 3
