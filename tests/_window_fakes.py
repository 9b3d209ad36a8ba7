"""Servers with a small context window, behind respx: an OpenAI-compatible one (the
llama-cpp-python server's real refusal) and Anthropic's Messages API (its real 400). Each
counts every request as its tokenizer would (3 characters a token, denser than the
library's estimate), refuses one that does not fit with the server's own error body,
checks the transcript is one the real server would take, and answers from a script.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import httpx

CHARS_PER_TOKEN = 3
"""The fakes' tokenizer: denser than the library's estimate (4), as a small model's is."""

Reply = Callable[[dict[str, Any]], dict[str, Any]]
"""A script: the request body to the reply's body (without usage)."""

SUMMARY_MARK = "You condense the earlier part"
"""How a fake tells a compactor's summary call (its system prompt)."""


def tokens_of(payload: Any) -> int:
    return math.ceil(len(json.dumps(payload, ensure_ascii=False)) / CHARS_PER_TOKEN)


class OpenAIServer:
    """`POST /chat/completions` with an `n_ctx`-token window (prompt + max_tokens)."""

    def __init__(self, n_ctx: int, reply: Reply, *, usage: bool = True):
        self.n_ctx = n_ctx
        self.reply = reply
        self.usage = usage
        """Whether replies report their token counts (some servers' do not)."""
        self.bodies: list[dict[str, Any]] = []
        self.prompts: list[int] = []
        """The prompt tokens of every request answered."""
        self.refused = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        check_openai_transcript(body["messages"])
        prompt = tokens_of(body["messages"]) + tokens_of(body.get("tools", []))
        asked = body.get("max_tokens") or 0
        if prompt + asked > self.n_ctx:
            self.refused += 1
            message = (
                f"This model's maximum context length is {self.n_ctx} tokens. However, you "
                f"requested {prompt + asked} tokens ({prompt} in the messages, {asked} in "
                "the completion). Please reduce the length of the messages or completion."
            )
            error = {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
            return httpx.Response(400, json={"error": error})
        self.prompts.append(prompt)
        answer = self.reply(body)
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}
        if body.get("stream"):
            return httpx.Response(
                200, text=_sse(answer, usage), headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, json={**answer, "usage": usage} if self.usage else answer)


def _sse(answer: dict[str, Any], usage: dict[str, Any]) -> str:
    """The answer as a Chat Completions stream: one delta, the finish, the usage."""
    choice = answer["choices"][0]
    delta = dict(choice["message"])
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    chunks = [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {"choices": [], "usage": usage},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def check_openai_transcript(messages: list[dict[str, Any]]) -> None:
    """Every assistant tool call answered by a `tool` message right after it, in any order,
    and no `tool` message without its call (llama-cpp-python and OpenAI refuse both)."""
    waiting: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            assert m["tool_call_id"] in waiting, f"message {i}: a result without its call"
            waiting.discard(m["tool_call_id"])
            continue
        assert not waiting, f"message {i}: calls without results: {sorted(waiting)}"
        if m["role"] == "assistant":
            waiting = {c["id"] for c in m.get("tool_calls") or []}
    assert not waiting, "the last calls have no results"


def openai_text(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}


def openai_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}


class AnthropicServer:
    """`POST /v1/messages` with a window of `limit` input tokens (the API counts the
    prompt alone), and the thinking blocks it sent checked byte for byte when echoed."""

    def __init__(self, limit: int, reply: Reply):
        self.limit = limit
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []
        self.prompts: list[int] = []
        self.refused = 0
        self.thinking: dict[str, dict[str, Any]] = {}
        """Signature -> the thinking block as sent."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.check(body["messages"])
        prompt = (
            tokens_of(body["messages"])
            + tokens_of(body.get("tools", []))
            + tokens_of(body.get("system", ""))
        )
        if prompt > self.limit:
            self.refused += 1
            message = f"prompt is too long: {prompt} tokens > {self.limit} maximum"
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message},
            }
            return httpx.Response(400, json=error, headers={"request-id": "req_long"})
        self.prompts.append(prompt)
        answer = self.reply(body)
        for block in answer["content"]:
            if block["type"] == "thinking":
                self.thinking[block["signature"]] = dict(block)
        answer = {
            "id": f"msg_{len(self.bodies)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_sequence": None,
            **answer,
            "usage": {"input_tokens": prompt, "output_tokens": 5},
        }
        if body.get("stream"):
            from _anthropic_helpers import as_events, sse

            return sse(*as_events(answer))
        return httpx.Response(200, json=answer, headers={"request-id": f"req_{len(self.bodies)}"})

    def check(self, messages: list[dict[str, Any]]) -> None:
        """The API's rules: alternating roles from a user turn; every tool_use answered in
        the very next user turn, results first; thinking blocks unchanged."""
        assert messages[0]["role"] == "user"
        waiting: set[str] = set()
        for i, m in enumerate(messages):
            assert i == 0 or m["role"] != messages[i - 1]["role"], f"message {i}: same role twice"
            blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text"}]
            if m["role"] == "user":
                results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
                assert set(results) == waiting, f"message {i}: results {results} for {waiting}"
                kinds = [b["type"] for b in blocks]
                assert kinds[: len(results)] == ["tool_result"] * len(results)
                waiting = set()
            else:
                assert not waiting
                waiting = {b["id"] for b in blocks if b["type"] == "tool_use"}
                for b in blocks:
                    if b["type"] == "thinking":
                        sent = self.thinking.get(b["signature"])
                        plain = {k: v for k, v in b.items() if k != "cache_control"}
                        assert sent == plain, f"message {i}: a thinking block was changed"
        assert not waiting


def anthropic_text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def anthropic_call(call_id: str, name: str, args: dict[str, Any], thought: str) -> dict[str, Any]:
    thinking = {"type": "thinking", "thinking": thought, "signature": f"sig-{call_id}"}
    use = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    return {"content": [thinking, use], "stop_reason": "tool_use"}


def is_summary(body: dict[str, Any]) -> bool:
    system = body.get("system")
    if isinstance(system, list):
        system = " ".join(b.get("text", "") for b in system)
    if isinstance(system, str) and SUMMARY_MARK in system:
        return True
    first = body["messages"][0] if body["messages"] else {}
    return first.get("role") == "system" and SUMMARY_MARK in str(first.get("content"))
