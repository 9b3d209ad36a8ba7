"""Server-sent Chat Completions chunks in, deltas out, then the whole reply (no I/O here).

The sync and async streams feed each event's data to one `StreamAssembler`. It yields
`TextDelta`, `ThinkingDelta` and `ToolCallDelta` as chunks arrive, assembles tool-call
argument fragments by index (a new id on a known index is a new call), and at the end
gives the reply in the shape of a non-streaming body, so the final `ModelResponse` comes
from the same `parse_completion` as `complete`'s. A stream that stops before its end is a
`ModelError`: nothing is ever built from a partial tool call.

Rule: no I/O and no loop; the caller feeds it chunks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from agentloops.errors import ModelError
from agentloops.events import Delta, TextDelta, ThinkingDelta, ToolCallDelta
from agentloops.providers._openai_http import detail
from agentloops.providers._openai_reply import WireUsage, _Wire, check, fresh_id


class WireFunctionDelta(_Wire):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class WireCallDelta(_Wire):
    index: int | None = Field(default=None, ge=0)
    id: str | None = None
    function: WireFunctionDelta | None = None


class WireDelta(_Wire):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: list[WireCallDelta] | None = None


class WireChunkChoice(_Wire):
    delta: WireDelta = WireDelta()
    finish_reason: str | None = None


class WireChunk(_Wire):
    choices: list[WireChunkChoice] = Field(default_factory=list)
    usage: WireUsage | None = None
    model: str | None = None


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    wire_id: str = ""
    """The id the server gave the call ("" while it gave none)."""


class StreamAssembler:
    """Feed it each event's `data`; it returns the deltas, then `body()` is the reply.

    Args:
        taken: the call ids already in the transcript, so a delta's `call_id` is the id
            the final response gives the call.
    """

    def __init__(self, taken: set[str]):
        self.done = False
        """`[DONE]` arrived: nothing more will."""
        self._taken = set(taken)
        self.chunks = 0
        """How many data chunks arrived (for error messages)."""
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        """The calls by key: the server's index, or the next free one when it reused one."""
        self._slots: dict[int, int] = {}
        """The server's index -> the key of the call it now names."""
        self._last: int | None = None
        self._finish: str | None = None
        self._usage: WireUsage | None = None
        self._model: str | None = None

    def feed(self, data: str, event: str = "") -> list[Delta]:
        """The deltas in one server-sent event.

        Raises:
            ModelError: an `error` event or body, data that is not JSON, or a chunk of an
                unexpected shape (naming the field).
        """
        if data.strip() == "[DONE]":
            self.done = True
            return []
        self.chunks += 1
        where = f"stream chunk {self.chunks}"
        try:
            body = json.loads(data)
        except ValueError:
            raise ModelError(f"{where} is not JSON: {data[:200]!r}", kind="bad_reply") from None
        if event == "error" or (isinstance(body, dict) and body.get("error")):
            raise ModelError(
                f"the server reported an error in {where}: {detail(data)}", kind="unavailable"
            )
        chunk: WireChunk = check(WireChunk, body, where)
        self._model = chunk.model or self._model
        if chunk.usage is not None:
            self._usage = chunk.usage  # the usage chunk (`choices: []`) comes last
        deltas: list[Delta] = []
        for choice in chunk.choices[:1]:  # we ask for one choice
            deltas.extend(self._delta(choice.delta))
            self._finish = choice.finish_reason or self._finish
        return deltas

    def _delta(self, delta: WireDelta) -> list[Delta]:
        out: list[Delta] = []
        thinking = delta.reasoning_content or delta.reasoning
        if thinking:
            out.append(ThinkingDelta(text=thinking))
        if delta.content:
            self._text.append(delta.content)
            out.append(TextDelta(text=delta.content))
        if delta.refusal:
            self._refusal.append(delta.refusal)
            out.append(TextDelta(text=delta.refusal))
        for piece in delta.tool_calls or []:
            out.extend(self._call_piece(piece))
        return out

    def _call_piece(self, piece: WireCallDelta) -> list[Delta]:
        call, key, call_id = self._call_for(piece)
        self._last = key
        name = ""
        function = piece.function or WireFunctionDelta()
        if function.name and not call.name:
            call.name = name = function.name
        arguments = function.arguments
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if arguments:
            call.arguments.append(arguments)
        if not (call_id or name or arguments):
            return []
        return [ToolCallDelta(index=key, call_id=call_id, name=name, arguments=arguments or "")]

    def _call_for(self, piece: WireCallDelta) -> tuple[_Call, int, str]:
        """The call `piece` belongs to, its key (the index its deltas show: unique per
        call), and, for a call it starts, the id its deltas show (else "").

        A new id on a known index starts a new call (a server that reuses index 0 for the
        next call): the calls are never merged, and none is dropped. Some servers
        (llama-cpp-python) repeat the id and name in every chunk: the same id continues
        the call, and only the arguments are joined.
        """
        index = piece.index
        key: int | None
        if index is None:  # some servers leave it out: a new id starts a new call
            last = None if self._last is None else self._calls[self._last]
            new = piece.id and (last is None or piece.id != last.wire_id)
            key = None if new or self._last is None else self._last
        else:
            key = self._slots.get(index)
            if key is not None and piece.id:
                wire_id = self._calls[key].wire_id
                if wire_id and piece.id != wire_id:
                    key = None  # a new id on a known index: the next call
        if key is not None:
            call = self._calls[key]
            if piece.id and not call.wire_id:
                call.wire_id = piece.id
            return call, key, ""
        wanted = len(self._calls) if index is None else index
        key = wanted if wanted not in self._calls else max(self._calls) + 1
        if index is not None:
            self._slots[index] = key
        call = self._calls[key] = _Call(wire_id=piece.id or "")
        call_id = fresh_id(piece.id or "", self._taken)
        call.id = piece.id or call_id  # without one, the final reply keeps the id shown
        return call, key, call_id

    def body(self) -> dict[str, Any]:
        """The reply in the shape of a non-streaming Chat Completions body.

        Raises:
            ModelError: the stream ended before its `finish_reason` or `[DONE]`.
        """
        if not (self.done or self._finish):
            calls = f", {len(self._calls)} tool call(s) unfinished" if self._calls else ""
            raise ModelError(
                f"the stream ended before the reply was complete (after {self.chunks} "
                f"chunks, no finish_reason and no [DONE]{calls})"
            )
        message: dict[str, Any] = {"content": "".join(self._text) or None}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": c.id or None,
                    "function": {"name": c.name, "arguments": "".join(c.arguments)},
                }
                for _, c in sorted(self._calls.items())
            ]
        body: dict[str, Any] = {
            "choices": [{"message": message, "finish_reason": self._finish}],
            "model": self._model,
        }
        if self._usage is not None:
            body["usage"] = self._usage.model_dump()
        return body
