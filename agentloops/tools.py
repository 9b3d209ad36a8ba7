"""Tools: plain functions with type hints, and the registry that calls them safely.

`ToolRegistry.call` never raises for a tool's own failure. An unknown name, bad
arguments, an exception, a timeout or an over-long output all come back as an
`is_error` outcome whose text the model can act on.
"""

from __future__ import annotations

import contextvars
import importlib
import inspect
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints

import pydantic

from agentloops.errors import ConfigurationError
from agentloops.messages import ToolCall
from agentloops.model import ToolSpec

Decision = Literal["allow", "deny", "ask"]
ApprovalPolicy = Callable[[ToolCall], Decision]
"""Decides per call: run it, refuse it, or pause for a human."""

INVALID_ARGUMENTS = "__invalid_arguments__"
"""The key a provider puts in `ToolCall.args` when the model's arguments did not parse
(`{INVALID_ARGUMENTS: "what was wrong"}`): the registry answers with that problem as an
error result and never runs the tool."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """What one tool call produced: the text the model sees, and whether it failed."""

    content: str
    is_error: bool = False
    seconds: float = 0.0


class Tool:
    """A function the model may call, with the JSON Schema of its arguments.

    Build one with the `tool` decorator or `Tool.from_function`. A `Tool` is still
    callable like the function it wraps.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        description: str,
        args_model: type[pydantic.BaseModel],
        read_only: bool = True,
        requires_approval: bool = False,
        timeout: float | None = None,
    ):
        self.fn = fn
        self.name = name
        self.description = description
        self.args_model = args_model
        self.read_only = read_only
        self.requires_approval = requires_approval
        self.timeout = timeout
        self.input_schema: dict[str, Any] = args_model.model_json_schema()
        self.input_schema.pop("title", None)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__doc__ = fn.__doc__
        self._validate = args_model.__pydantic_validator__.validate_python

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        read_only: bool = True,
        requires_approval: bool = False,
        timeout: float | None = None,
    ) -> Tool:
        """Build a tool from a function's signature, type hints and docstring.

        Raises:
            ConfigurationError: a parameter without a type hint, `*args`/`**kwargs`,
                a name the providers reject, or a non-positive timeout.
        """
        name = name or fn.__name__
        if not _NAME.match(name):
            raise ConfigurationError(f"tool name {name!r} must match {_NAME.pattern}")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"tool {name!r}: timeout must be > 0, got {timeout}")
        summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception as exc:  # an unresolvable forward reference
            raise ConfigurationError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(f"tool {name!r}: *args and **kwargs cannot be described")
            if param.name not in hints:
                raise ConfigurationError(
                    f"tool {name!r}: parameter {param.name!r} needs a type hint"
                )
            default = ... if param.default is param.empty else param.default
            doc = param_docs.get(param.name)
            fields[param.name] = (hints[param.name], pydantic.Field(default, description=doc))
        args_model = pydantic.create_model(
            f"{name}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        return cls(
            fn,
            name=name,
            description=description or summary or name,
            args_model=args_model,
            read_only=read_only,
            requires_approval=requires_approval,
            timeout=timeout,
        )

    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.input_schema)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments for the function; raises `pydantic.ValidationError`."""
        return self._validate(args).__dict__  # type: ignore[no-any-return]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # A decorated module-level function is shadowed by its Tool: pickle it by name.
        module, qualname = getattr(self.fn, "__module__", None), self.fn.__qualname__
        if module and _lookup(module, qualname) is self:
            return (_lookup, (module, qualname))
        options = (self.name, self.description, self.read_only, self.requires_approval)
        return (_rebuild, (self.fn, *options, self.timeout))


def _lookup(module: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _rebuild(
    fn: Callable[..., Any],
    name: str,
    description: str,
    read_only: bool,
    requires_approval: bool,
    timeout: float | None,
) -> Tool:
    return Tool.from_function(
        fn,
        name=name,
        description=description,
        read_only=read_only,
        requires_approval=requires_approval,
        timeout=timeout,
    )


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = True,
    requires_approval: bool = False,
    timeout: float | None = None,
) -> Any:
    """Turn a typed function into a `Tool`, with or without arguments.

    Examples:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.input_schema["required"]
        ['a', 'b']
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            f,
            name=name,
            description=description,
            read_only=read_only,
            requires_approval=requires_approval,
            timeout=timeout,
        )

    return wrap(fn) if fn is not None else wrap


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (docstring without its Args section) and per-parameter text."""
    summary: list[str] = []
    params: dict[str, str] = {}
    in_args, current = False, ""
    for line in doc.splitlines():
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            if line and not line[0].isspace():
                in_args = False  # the next section (Returns:, Raises:, ...) ends it
            else:
                match = re.match(r"^\s+(\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
                if match:
                    current = match.group(1)
                    params[current] = match.group(2).strip()
                elif current and line.strip():
                    params[current] += " " + line.strip()
                continue
        if not in_args and re.match(r"^(Returns|Raises|Yields|Example|Examples):\s*$", line):
            break
        summary.append(line)
    return "\n".join(summary).strip(), params


_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""One encoder for every tool output (json.dumps with options builds a new one per call)."""


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    if isinstance(value, dict | list | tuple | int | float | bool):
        try:
            return _encode(value)
        except ValueError:  # a circular structure
            pass
    return str(value)


def field_errors(
    error: pydantic.ValidationError,
    *,
    root: str = "(arguments)",
    width: int | None = 80,
    skip: Callable[[Any], bool] | None = None,
) -> list[str]:
    """One `"field.path: message (got value)"` line per validation error, for the model.

    `root` names a problem with the whole value, `width` cuts the quoted value (`None`
    leaves it out), and `skip` drops errors about inputs it accepts.
    """
    lines = []
    for err in error.errors(include_url=False):
        if skip is not None and skip(err.get("input")):
            continue
        where = ".".join(str(p) for p in err["loc"]) or root
        got = (
            "" if width is None or err["type"] == "missing" else f" (got {err['input']!r:.{width}})"
        )
        lines.append(f"{where}: {err['msg']}{got}")
    return lines


class _TimedOut(Exception):
    pass


def _call_with_timeout(fn: Callable[..., Any], kwargs: dict[str, Any], timeout: float) -> Any:
    """Run on a daemon thread and stop waiting at the deadline (a thread cannot be killed)."""
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    ctx = contextvars.copy_context()

    def target() -> None:
        try:
            box.append((True, ctx.run(fn, **kwargs)))
        except BaseException as exc:
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=target, daemon=True, name="agentloops-tool").start()
    if not done.wait(timeout):
        raise _TimedOut
    ok, value = box[0]
    if not ok:
        raise value
    return value


class ToolRegistry:
    """The tools a loop may call, by name.

    Args:
        tools: `Tool`s or plain typed functions (wrapped with `Tool.from_function`).
        max_output_chars: longer outputs are cut to head and tail with a marker and
            returned as an error, so the model narrows its request.
    """

    def __init__(
        self, tools: Iterable[Tool | Callable[..., Any]] = (), *, max_output_chars: int = 50_000
    ):
        if max_output_chars < 200:
            raise ConfigurationError(f"max_output_chars must be >= 200, got {max_output_chars}")
        self.max_output_chars = max_output_chars
        self._tools: dict[str, Tool] = {}
        self._specs: list[ToolSpec] | None = None
        for t in tools:
            self.register(t)

    def register(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool; a second tool with the same name is a `ConfigurationError`."""
        if not isinstance(t, Tool):
            if not callable(t):
                raise ConfigurationError(f"not a tool or a function: {t!r}")
            t = Tool.from_function(t)
        if t.name in self._tools:
            raise ConfigurationError(f"duplicate tool name {t.name!r}")
        self._tools[t.name] = t
        self._specs = None
        return t

    def specs(self) -> list[ToolSpec]:
        """What the model is told about every tool, in registration order."""
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def call(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Run one tool. Never raises for the tool's own failure (see the module docstring).

        Exceptions that are not `Exception`s (KeyboardInterrupt, SystemExit) propagate.
        """
        start = time.perf_counter()
        t = self._tools.get(name)
        if t is None:
            known = ", ".join(self._tools) or "(none)"
            return _error(f"unknown tool {name!r}; available tools: {known}", start)
        if not isinstance(args, dict):
            return _error(f"arguments for {name!r} must be a JSON object, got {args!r:.80}", start)
        if INVALID_ARGUMENTS in args:
            return _error(f"invalid arguments for {name!r}: {args[INVALID_ARGUMENTS]}", start)
        try:
            kwargs = t.validate(args)
        except pydantic.ValidationError as exc:
            return _error(f"invalid arguments for {name!r}: {'; '.join(field_errors(exc))}", start)
        try:
            if t.timeout is None:
                value = t.fn(**kwargs)
            else:
                value = _call_with_timeout(t.fn, kwargs, t.timeout)
        except _TimedOut:
            return _error(f"{name!r} timed out after {t.timeout} s", start)
        except Exception as exc:
            return _error(f"{name!r} failed: {type(exc).__name__}: {exc}", start)
        text = _to_text(value)
        if len(text) > self.max_output_chars:
            return _error(_cut(text, self.max_output_chars), start)
        return ToolOutcome(content=text, seconds=time.perf_counter() - start)


def _error(message: str, start: float) -> ToolOutcome:
    return ToolOutcome(content=message, is_error=True, seconds=time.perf_counter() - start)


def _cut(text: str, limit: int) -> str:
    keep = (limit - 120) // 2
    cut = len(text) - 2 * keep
    return (
        f"{text[:keep]}\n[... output too long: {cut} of {len(text)} characters cut; "
        f"ask for less ...]\n{text[-keep:]}"
    )
