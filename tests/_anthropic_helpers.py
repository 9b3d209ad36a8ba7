"""Replies of the Messages API written out by hand for the AnthropicModel tests: JSON
bodies, the same bodies as server-sent events, and response bodies that stall or break.

Everything here is built from the API's documented wire format, independently of
agentloops, so the tests compare the library against the wire and not against itself.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import respx

from agentloops import AnthropicModel, tool

SIGNATURE = 'EqQBCkYIARgCKkD+/sig==\n with spaces, unicode é and "quotes"  '
THINKING = {"type": "thinking", "thinking": "  Let me look it up.\n", "signature": SIGNATURE}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a\n=="}
EPHEMERAL = {"type": "ephemeral"}
SSE_HEADERS = {"content-type": "text/event-stream", "request-id": "req_sse"}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(call_id: str, name: str = "lookup", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def reply_body(
    *content: dict[str, Any],
    stop_reason: str = "end_turn",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def reply(
    *content: dict[str, Any],
    stop_reason: str = "end_turn",
    usage: dict[str, int] | None = None,
    request_id: str = "req_ok",
) -> httpx.Response:
    body = reply_body(*content, stop_reason=stop_reason, usage=usage)
    return httpx.Response(200, json=body, headers={"request-id": request_id})


def error(status: int, kind: str, message: str, request_id: str = "req_err") -> httpx.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    # retry-after-ms makes the retry policy wait 1 ms (the header a server may send)
    headers = {"request-id": request_id, "retry-after-ms": "1"}
    return httpx.Response(status, json=body, headers=headers)


def bodies(route: respx.Route) -> list[dict[str, Any]]:
    return [json.loads(call.request.content) for call in route.calls]


def breakpoints(node: Any) -> int:
    """How many cache_control markers a request body holds, anywhere."""
    if isinstance(node, dict):
        return ("cache_control" in node) + sum(breakpoints(v) for v in node.values())
    if isinstance(node, list):
        return sum(breakpoints(v) for v in node)
    return 0


def make_model(max_retries: int = 2, **kw: Any) -> AnthropicModel:
    client = anthropic.Anthropic(api_key="test-key", max_retries=max_retries)
    return AnthropicModel(client=client, **kw)


def make_async_model(max_retries: int = 2, **kw: Any) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(api_key="test-key", max_retries=max_retries)
    return AnthropicModel(async_client=client, **kw)


def make_tools(log: list[str]) -> list[Any]:
    @tool
    def lookup(query: str) -> str:
        """Look a query up."""
        log.append(query)
        return f"found {query}"

    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        log.append("explode")
        raise RuntimeError(reason)

    return [lookup, explode]


# -- server-sent events ----------------------------------------------------------------


def encode(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def sse(*events: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, content=encode(*events), headers=SSE_HEADERS)


def pieces(s: str, size: int) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)]


def as_events(body: dict[str, Any], size: int = 7) -> list[dict[str, Any]]:
    """`body` (a plain reply) as the API streams it: each block started empty and filled
    by deltas of at most `size` characters (tool arguments split mid-JSON)."""
    usage = body["usage"]
    start_usage = {**usage, "output_tokens": 1}
    message = {**body, "content": [], "stop_reason": None, "usage": start_usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for index, block in enumerate(body["content"]):
        kind, deltas = block["type"], []
        if kind == "text":
            start = {"type": "text", "text": ""}
            cited = block.get("citations") or []
            deltas = [{"type": "citations_delta", "citation": c} for c in cited]
            deltas += [{"type": "text_delta", "text": p} for p in pieces(block["text"], size)]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}  # the signature comes last
            deltas = [
                *(
                    {"type": "thinking_delta", "thinking": p}
                    for p in pieces(block["thinking"], size)
                ),
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif "input" in block:
            start = {**block, "input": {}}
            arguments = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": p} for p in pieces(arguments, size)
            ]
        else:
            start = block
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        {"type": "message_stop"},
    ]
    return events


def streamed(*content: dict[str, Any], stop_reason: str = "end_turn", **kw: Any) -> httpx.Response:
    return sse(*as_events(reply_body(*content, stop_reason=stop_reason, **kw)))


def streamed_text(answer: str) -> httpx.Response:
    return streamed(text(answer))


class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body sent in `chunks`, then ended by `then`: nothing (a clean end), an
    exception to raise, or "hang" (the async form waits until it is cancelled).
    `closed` says whether the client closed it."""

    def __init__(self, chunks: list[bytes], then: BaseException | str | None = None):
        self.chunks = chunks
        self.then = then
        self.closed = False
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk
        if isinstance(self.then, BaseException):
            raise self.then

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk
        if self.then == "hang":
            await asyncio.sleep(3600)
        if isinstance(self.then, BaseException):
            raise self.then

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def body_response(body: Body) -> httpx.Response:
    return httpx.Response(200, stream=body, headers=SSE_HEADERS)
