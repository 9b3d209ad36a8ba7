"""`#E<n>` placeholders in ReWOO tool arguments: finding, masking and substituting them.

A placeholder is `#E` then digits, as a whole token: `#E1` never matches inside `#E10`
or `#E1a`. Placeholders are looked for in argument values at any depth of lists and
dicts (dict keys are argument names, never placeholders).

Rule: text and argument values only; no plan checks, no tool call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pydantic

from agentloops._validation import field_errors

PLACEHOLDER = re.compile(r"#E\d+\b")
STEP_ID = re.compile(r"#E[1-9]\d*")
"""A well-formed step id: `#E` and a positive integer without leading zeros."""


def references(value: Any) -> list[str]:
    """Every placeholder in `value`, in order of appearance, without repeats."""
    found: dict[str, None] = {}
    _collect(value, found)
    return list(found)


def _collect(value: Any, found: dict[str, None]) -> None:
    if isinstance(value, str):
        if "#E" in value:
            found.update(dict.fromkeys(PLACEHOLDER.findall(value)))
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, found)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, found)


def is_placeholder(value: Any) -> bool:
    """True for a string that is exactly one placeholder, such as `"#E3"`."""
    return isinstance(value, str) and PLACEHOLDER.fullmatch(value) is not None


def masked_errors(error: pydantic.ValidationError) -> list[str]:
    """A validation error's messages, minus those about a value that is exactly a
    placeholder: its type can only be checked once the output is substituted."""
    return field_errors(error, width=60, skip=is_placeholder)


class Unresolved(KeyError):
    """A placeholder whose step has no output to substitute."""


def substitute(value: Any, outputs: Mapping[str, str], *, parse_json: bool = False) -> Any:
    """`value` with every placeholder replaced by its step's output.

    A value that is exactly a placeholder becomes the output text, or with `parse_json`
    the parsed value when the text is JSON; a placeholder inside a longer string is
    replaced by the output text. Lists and dicts are rebuilt, never mutated.

    Raises:
        Unresolved: a placeholder names a step missing from `outputs`.
    """
    if isinstance(value, str):
        if "#E" not in value:
            return value
        if is_placeholder(value):
            text = _output(outputs, value)
            return _parsed(text) if parse_json else text
        return PLACEHOLDER.sub(lambda m: _output(outputs, m.group()), value)
    if isinstance(value, dict):
        return {k: substitute(v, outputs, parse_json=parse_json) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [substitute(v, outputs, parse_json=parse_json) for v in value]
    return value


def _output(outputs: Mapping[str, str], step_id: str) -> str:
    try:
        return outputs[step_id]
    except KeyError:
        raise Unresolved(step_id) from None


def looks_like_json(text: str) -> bool:
    """A cheap first test: could `text` be a JSON value other than a string?"""
    stripped = text.lstrip()
    return bool(stripped) and stripped[0] in "{[-0123456789tfn"


def _parsed(text: str) -> Any:
    if not looks_like_json(text):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text
