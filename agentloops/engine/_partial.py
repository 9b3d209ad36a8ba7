"""A typed answer read as it streams: the reply's text, or the final-answer tool's arguments,
parsed so far (`pydantic_core.from_json(..., allow_partial=...)`), as `OutputDelta` events.

Both drivers feed it a call's deltas when the `CallModel` says the reply may be the run's
final answer (`OutputTarget`); it never validates (the machine does, once the reply is whole).

Rule: parsing only; no I/O, no decision, no loop.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from agentloops.engine.effects import OutputTarget
from agentloops.events import Event, OutputDelta, TextDelta, ToolCallDelta

_NOTHING = object()


class PartialOutput:
    """One model call's answer as it arrives; `feed` each delta, get an `OutputDelta` when
    the answer parsed so far has changed."""

    __slots__ = ("_args", "_call", "_last", "_text", "target")

    def __init__(self, target: OutputTarget):
        self.target = target
        self._text: list[str] = []
        self._args: list[str] = []
        self._call: int | None = None
        """The index of the final-answer tool call, once it has started."""
        self._last: Any = _NOTHING

    def feed(self, delta: Event) -> OutputDelta | None:
        kind = type(delta)
        if kind is TextDelta:
            if self._call is not None:  # the answer is the tool's: text is a preamble
                return None
            self._text.append(delta.text)  # type: ignore[attr-defined]
            source = "".join(self._text)
        elif kind is ToolCallDelta:
            index: int = delta.index  # type: ignore[attr-defined]
            if self._call is None and delta.name == self.target.tool:  # type: ignore[attr-defined]
                self._call = index
            if index != self._call or not delta.arguments:  # type: ignore[attr-defined]
                return None
            self._args.append(delta.arguments)  # type: ignore[attr-defined]
            source = "".join(self._args)
        else:
            return None
        data = self._parse(source)
        if data is _NOTHING or data == self._last:
            return None
        self._last = data
        return OutputDelta(data=data)

    def _parse(self, source: str) -> Any:
        start = source.find("{")  # the answer's JSON is an object (after any prose or fence)
        if start < 0:
            return _NOTHING
        try:
            data = from_json(source[start:], allow_partial="trailing-strings")
        except ValueError:  # not JSON after all, or complete JSON and a closing fence
            return _NOTHING
        key = self.target.key
        if key is None:
            return data
        if not isinstance(data, dict) or key not in data:
            return _NOTHING
        return data[key]
