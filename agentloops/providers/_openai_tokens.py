"""The tokenize endpoints OpenAI-compatible servers serve beside Chat Completions, and how to
read them: pure functions, no HTTP (`OpenAICompatModel.count_tokens` sends).

- vLLM: `POST /tokenize` with the chat `messages` (and `tools`): the chat template applied,
  `{"count": N, "max_model_len": M, "tokens": [...]}`, an exact count.
- llama.cpp's llama-server: `POST /tokenize` with `{"content": text}`: `{"tokens": [...]}`.
- llama-cpp-python's server: `POST /extras/tokenize/count` with `{"input": text}`:
  `{"count": N}`.

One body serves both `/tokenize`s (vLLM reads `messages`, llama-server `content`). The
text the last two tokenize is the messages rendered plainly (role, text, tool calls as
JSON, the tools' descriptions), so a template's own markers are added as an overhead per
message and per tool. OpenAI and Ollama serve neither: they answer 404, and the client
remembers that and estimates from then on.

Rule: no I/O and no state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentloops.model import MESSAGE_OVERHEAD, TOOL_OVERHEAD

MISSING = (404, 405, 501)
"""Statuses that say a server has no such endpoint (remembered: not asked again)."""


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    """`"tokenize"` or `"extras"`: which endpoint, as the client remembers it."""
    url: str
    body: dict[str, Any]
    overhead: int
    """Tokens to add to a count of the plain text (a template's markers)."""


def root(base_url: str) -> str:
    """The server's root: the base URL without its `/v1` (the tokenizers live there)."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The wire messages and tools as the plain text a tokenizer is given."""
    parts = [json.dumps(tools, ensure_ascii=False)] if tools else []
    for m in messages:
        parts.append(f"{m['role']}\n{m.get('content') or ''}")
        if m.get("tool_calls"):
            parts.append(json.dumps(m["tool_calls"], ensure_ascii=False))
    return "\n".join(parts)


def probes(base_url: str, model: str, body: dict[str, Any]) -> list[Probe]:
    """The endpoints to try, in order, for a Chat Completions `body`."""
    messages, tools = body["messages"], body.get("tools") or []
    text = render(messages, tools)
    overhead = MESSAGE_OVERHEAD * len(messages) + TOOL_OVERHEAD * len(tools)
    chat: dict[str, Any] = {"model": model, "messages": messages, "add_generation_prompt": True}
    if tools:
        chat["tools"] = tools
    base = root(base_url)
    return [
        Probe("tokenize", f"{base}/tokenize", {**chat, "content": text}, overhead),
        Probe("extras", f"{base}/extras/tokenize/count", {"model": model, "input": text}, overhead),
    ]


def read(probe: Probe, answer: Any) -> int | None:
    """The count a tokenizer's answer gives, or `None` for an answer of another shape."""
    if not isinstance(answer, dict):
        return None
    count = answer.get("count")
    if isinstance(count, int) and "max_model_len" in answer:
        return count  # vLLM: the chat template applied, tools included
    if isinstance(count, int):
        return count + probe.overhead
    tokens = answer.get("tokens")
    if isinstance(tokens, list):
        return len(tokens) + probe.overhead
    return None
