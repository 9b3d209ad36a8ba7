"""Validation errors as lines a model can act on: what tools, structured output and plans
share when pydantic refuses a value.

Rule: a helper at the bottom of the package; it imports only `_text` from agentloops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic

from agentloops._text import quoted


def field_errors(
    error: pydantic.ValidationError,
    *,
    root: str = "(arguments)",
    width: int | None = 80,
    skip: Callable[[Any], bool] | None = None,
) -> list[str]:
    """One `"field.path: message (got value)"` line per validation error, for the model.

    `root` names a problem with the whole value, `width` cuts the quoted value (`None`
    leaves it out; `_text.quoted`), and `skip` drops errors about inputs it accepts.
    """
    lines = []
    for err in error.errors(include_url=False):
        if skip is not None and skip(err.get("input")):
            continue
        where = ".".join(str(p) for p in err["loc"]) or root
        got = ""
        if width is not None and err["type"] != "missing":
            got = f" (got {quoted(err['input'], width)})"
        lines.append(f"{where}: {err['msg']}{got}")
    return lines
