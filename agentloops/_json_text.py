"""The JSON in a model's reply: a bare object, a fenced block, or the span between braces.

Providers fill `ModelResponse.output` with it and `structured` validates it. Rule: a helper
at the bottom of the package; it imports nothing from agentloops.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f]")


def json_in(text: str) -> str:
    """The JSON in a model's reply: the reply itself, a fenced block, or the span from the
    first "{" to the last "}" ("" when an object is opened but never closed).

    A raw control character inside a string (small models write real newlines there) is
    escaped, so the result parses.
    """
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    elif not text.startswith("{") and "{" in text:
        text = text[text.index("{") : text.rfind("}") + 1]
    if _CONTROL.search(text) is None:
        return text
    return _STRING.sub(lambda s: _CONTROL.sub(_escaped, s.group()), text)


def _escaped(char: re.Match[str]) -> str:
    return json.dumps(char.group())[1:-1]  # "\n", "\t", or "\u001b"


def parse_json(text: str) -> Any:
    """The JSON value in a model's reply, or None when there is none: a provider fills
    `ModelResponse.output` with it, and `ask_structured` sends the problem back."""
    try:
        return json.loads(json_in(text))
    except ValueError:
        return None
