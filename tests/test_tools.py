"""Tools: schemas from type hints, and a registry whose calls never raise for a tool's failure."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pydantic
import pytest

from agentloops import ConfigurationError, Tool, ToolRegistry, tool


@tool(timeout=0.05)
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    threading.Event().wait(seconds)
    return "done"


@tool
def divide(a: int, b: int = 1) -> float:
    """Divide two numbers.

    Args:
        a: the dividend.
        b: the divisor, which
            must not be zero.

    Returns:
        The quotient.
    """
    return a / b


class Point(pydantic.BaseModel):
    x: int


def unhinted(a):  # type: ignore[no-untyped-def]
    return a


def variadic(*args: int) -> int:
    return 0


def dangling(a: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
    """A forward reference that cannot be resolved."""


def test_schema_and_description_come_from_the_function() -> None:
    assert divide.description == "Divide two numbers."
    props = divide.input_schema["properties"]
    assert props["a"]["description"] == "the dividend."
    assert props["b"]["description"] == "the divisor, which must not be zero."
    assert divide.input_schema["required"] == ["a"] and "title" not in divide.input_schema
    assert divide(6, 3) == 2.0 and repr(divide) == "Tool('divide')"
    assert divide.validate({"a": "4"}) == {"a": 4, "b": 1}
    assert divide.spec().name == "divide"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Tool.from_function(divide.fn, name="has space"), "must match"),
        (lambda: Tool.from_function(divide.fn, timeout=0), "timeout must be > 0"),
        (lambda: Tool.from_function(unhinted), "needs a type hint"),
        (lambda: Tool.from_function(variadic), r"\*args and \*\*kwargs"),
        (lambda: Tool.from_function(dangling), "cannot resolve type hints"),
        (lambda: ToolRegistry([divide, divide]), "duplicate tool name 'divide'"),
        (lambda: ToolRegistry(["not a function"]), "not a tool or a function"),
        (lambda: ToolRegistry(max_output_chars=10), "max_output_chars must be >= 200"),
    ],
)
def test_mistakes_are_configuration_errors(build: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build()


LOOP: dict[str, Any] = {}
LOOP["self"] = LOOP  # not JSON even with default=str


def shout(text: str) -> Any:
    """Return the text, or something else for special inputs."""
    special = {"none": None, "point": Point(x=1), "set": {1}, "loop": LOOP, "long": "y" * 500}
    return special.get(text, text)


def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@pytest.mark.parametrize(
    ("name", "args", "content", "is_error"),
    [
        ("shout", {"text": "hi"}, "hi", False),
        ("shout", {"text": "none"}, "(no output)", False),
        ("shout", {"text": "point"}, '{"x":1}', False),
        ("shout", {"text": "set"}, '"{1}"', False),
        ("shout", {"text": "loop"}, "{'self': {...}}", False),
        ("divide", {"a": 1, "b": 0}, "'divide' failed: ZeroDivisionError: division by zero", True),
        ("fail", {"reason": "boom"}, "'fail' failed: RuntimeError: boom", True),
        ("nope", {}, "unknown tool 'nope'; available tools: shout, divide, fail, slow", True),
        ("shout", ["hi"], "arguments for 'shout' must be a JSON object, got ['hi']", True),
        ("shout", {}, "invalid arguments for 'shout': text: Field required", True),
        ("divide", {"a": "x"}, "invalid arguments for 'divide': a: Input should be", True),
        ("slow", {"seconds": 5}, "'slow' timed out after 0.05 s", True),
        ("slow", {"seconds": 0}, "done", False),
    ],
)
def test_registry_call_outcomes(name: str, args: Any, content: str, is_error: bool) -> None:
    registry = ToolRegistry([shout, divide, fail, slow])
    outcome = registry.call(name, args)
    assert outcome.content.startswith(content) and outcome.is_error is is_error
    assert outcome.seconds >= 0


def test_a_timed_out_tool_that_raises_reports_its_error() -> None:
    @tool(timeout=1)
    def broken() -> str:
        """Fails on its thread."""
        raise KeyError("k")

    assert ToolRegistry([broken]).call("broken", {}).content == "'broken' failed: KeyError: 'k'"


def test_long_output_is_cut_head_and_tail() -> None:
    outcome = ToolRegistry([shout], max_output_chars=200).call("shout", {"text": "long"})
    assert outcome.is_error and "output too long: 420 of 500 characters cut" in outcome.content
    assert outcome.content.startswith("y" * 40) and outcome.content.endswith("y" * 40)


def test_registry_views() -> None:
    registry = ToolRegistry([shout])
    registry.register(divide)
    assert registry.names == ["shout", "divide"] and len(registry) == 2
    assert "divide" in registry and "fail" not in registry
    assert [t.name for t in registry] == ["shout", "divide"]
    assert registry.get("divide") is divide and registry.get("x") is None
    assert registry.specs() is registry.specs()  # cached until the next register


def test_tools_pickle_by_name_or_by_rebuilding() -> None:
    assert pickle.loads(pickle.dumps(divide)) is divide
    rebuilt = pickle.loads(pickle.dumps(Tool.from_function(shout, name="yell", timeout=2)))
    assert (rebuilt.name, rebuilt.timeout, rebuilt("hi")) == ("yell", 2, "hi")
