"""How a tool's return value, or its failure, becomes the text the model sees.

Every outcome of `ToolRegistry.call` and `acall` passes through `capped`, so no text
(an output, an exception's message, a validation report) goes to the model whole when
it is longer than the registry's `max_output_chars`.

Rule: text only; it knows no registry, loop or driver.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from agentloops._text import cut

_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""One encoder for every tool output (json.dumps with options builds a new one per call)."""


def to_text(value: Any) -> str:
    """Strings as they are, `None` as "(no output)", pydantic models and JSON-like values
    as JSON, anything else (or JSON that fails: circular, non-string keys) as `str()`.

    Raises:
        Exception: whatever `str(value)` raised; no text could be made.
    """
    if type(value) is str:
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, str):  # a subclass: its characters, not its __str__
        return str.__str__(value)
    if isinstance(value, pydantic.BaseModel):
        try:
            return value.model_dump_json()
        except Exception:  # a field pydantic cannot serialise: fall back to str()
            pass
    elif isinstance(value, dict | list | tuple | int | float | bool):
        try:
            return _encode(value)
        except Exception:  # circular, non-string keys, a nested __str__ that raises, ...
            pass
    text = str(value)
    return str.__str__(text)  # a __str__ may return a str subclass


def describe(exc: BaseException, limit: int) -> str:
    """`"TypeName: message"`, the message cut to `limit` characters; never raises."""
    try:
        message = str(exc)
    except Exception as inner:  # an exception whose __str__ raises
        message = f"(its message could not be read: {type(inner).__name__})"
    return f"{type(exc).__name__}: {capped(message, limit)}"


def capped(text: str, limit: int) -> str:
    """`text`, or its head and tail with a marker saying how much was cut, in `limit`."""
    return cut(text, limit, _TOO_LONG, within=True)


_TOO_LONG = "[... output too long: {cut} of {total} characters cut; ask for less ...]"
