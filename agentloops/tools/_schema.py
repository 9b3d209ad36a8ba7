"""A tool's arguments model and description, read from its function's hints and docstring.

Rule: it reads functions; it knows no registry, loop or driver.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

import pydantic

from agentloops.errors import ConfigurationError

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")


def arguments_model(fn: Callable[..., Any], name: str) -> tuple[type[pydantic.BaseModel], str]:
    """The pydantic model of `fn`'s keyword arguments, and its docstring's description.

    Raises:
        ConfigurationError: a parameter without a type hint, `*args`/`**kwargs`, or a
            hint that cannot be resolved.
    """
    summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an unresolvable forward reference
        raise ConfigurationError(f"tool {name!r}: cannot resolve type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(f"tool {name!r}: *args and **kwargs cannot be described")
        if param.name not in hints:
            raise ConfigurationError(f"tool {name!r}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is param.empty else param.default
        doc = param_docs.get(param.name)
        fields[param.name] = (hints[param.name], pydantic.Field(default, description=doc))
    model = pydantic.create_model(
        f"{name}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields
    )
    return model, summary


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
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


def is_async(fn: Callable[..., Any]) -> bool:
    """True for an `async def` function, or an object whose `__call__` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  (we want the method, not callable())
    )
