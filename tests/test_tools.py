import pickle
import threading
from typing import Annotated, Literal

import pydantic
import pytest

from agentloops import ConfigurationError, Tool, ToolRegistry, tool


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
