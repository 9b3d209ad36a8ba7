"""The offline demo model: a deterministic stand-in that plays every role from its requests.

It is a `FunctionModel`: each request is read (which role, which task, which tool
outputs) and answered by a function in `writers`, so the router, the loops, the tools
and the evaluator all really run; only the judgement is canned. Token counts are
estimates (4 characters a token) with a simulated prompt cache, so the usage table has
the same shape it has with a real provider.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

from agentloops import Message, ModelRequest, ModelResponse, Usage
from agentloops.testing import FunctionModel, respond, respond_structured, use_tools
from market_analyst import writers

MODEL_NAME = "offline-demo (deterministic stand-in)"
BANNER = (
    "Offline demo model: a deterministic stand-in, not a language model. It routes, plans, "
    "writes and votes by rules applied to the requests it receives, so every loop, tool "
    "call and checkpoint below is real, but the judgement is canned and token counts are "
    "estimates. For a real model set ANTHROPIC_API_KEY (Claude), or pass "
    "--base-url http://localhost:11434/v1 --model qwen3:8b (Ollama or any "
    "OpenAI-compatible server)."
)


def role_of(request: ModelRequest) -> str:
    """Which part of the system sent this request.

    Structured requests are known by their schema name; free-text ones by the system
    prompt's first line, which every agentloops component keeps stable.
    """
    if request.output is not None:
        return {
            "RouteDecision": "router",
            "ReWOOPlan": "rewoo_planner",
            "Plan": "planner",
            "Verdict": "evaluator",
        }.get(request.output.name, "unknown:" + request.output.name)
    first = request.system.strip().splitlines()[0].lower() if request.system.strip() else ""
    if "solver" in first:
        return "solver"
    if "report" in first:
        return "reporter"
    if request.tools:
        return "executor"
    return "writer"


def _all_text(request: ModelRequest) -> str:
    parts = [request.system]
    for message in request.messages:
        for block in message.content:
            parts.append(getattr(block, "text", None) or getattr(block, "content", "") or "")
    return "\n".join(p for p in parts if p)


def _first_user_text(request: ModelRequest) -> str:
    return request.messages[0].text if request.messages else ""


def task_of(request: ModelRequest) -> str:
    """The user's request inside a component's prompt (the part after a "Task:" label,
    else the first user message)."""
    text = _first_user_text(request)
    for label in ("task", "request", "question"):
        found = _labelled(text, label)
        if found:
            return found
    return text


def _labelled(text: str, label: str) -> str:
    """The text after `label:` up to the next blank line, or ""."""
    lower = text.lower()
    for marker in (f"<{label}>", f"{label}:"):
        start = lower.find(marker)
        if start != -1:
            rest = text[start + len(marker) :].lstrip()
            end_tag = rest.lower().find(f"</{label}>")
            return (rest[:end_tag] if end_tag != -1 else rest.split("\n\n")[0]).strip()
    return ""


def answer(request: ModelRequest) -> ModelResponse:
    """The stand-in's answer to one request, by role."""
    role = role_of(request)
    task = task_of(request)
    if role == "router":
        return respond_structured(writers.route(task))
    if role == "rewoo_planner":
        return respond_structured(writers.rewoo_plan(task))
    if role == "planner":
        return respond_structured(writers.deep_plan(task))
    if role == "evaluator":
        draft, evidence = _draft_and_evidence(request)
        return respond_structured(writers.verdict(draft, evidence))
    if role == "executor":
        last = request.messages[-1]
        if not last.tool_results:
            return use_tools(*writers.step_calls(task))
        lines = writers.findings(_all_text(request))
        return respond("\n".join(f"- {x}" for x in lines) or "- No findings.")
    if role == "reporter":
        return respond(writers.deep_report(task, _all_text(request)))
    return respond(writers.flash_briefing(task, _all_text(request)))


def _draft_and_evidence(request: ModelRequest) -> tuple[str, str]:
    text = _first_user_text(request)
    return _labelled(text, "draft"), _labelled(text, "evidence")


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _render(value: Any) -> str:
    return json.dumps(value, default=repr, sort_keys=True)


class DemoModel(FunctionModel):
    """The deterministic stand-in, with estimated usage and a simulated prompt cache.

    The cache works like a provider's: the system prompt and tools, then the whole
    transcript before the newest message, are cached prefixes; a prefix sent before is
    a cache read, a new one a cache write, and only the newest message is uncached.
    """

    def __init__(self) -> None:
        super().__init__(self._answer)
        self._seen: set[int] = set()
        self._cache_lock = threading.Lock()

    def _answer(self, request: ModelRequest) -> ModelResponse:
        response = answer(request)
        usage = self._usage(request, response.message)
        return dataclasses.replace(response, usage=usage, model=MODEL_NAME)

    def _usage(self, request: ModelRequest, reply: Message) -> Usage:
        head = request.system + _render([dataclasses.asdict(t) for t in request.tools])
        history = [_render(dataclasses.asdict(m)) for m in request.messages]
        head_key, prefix_key = hash(head), hash((head, *history[:-1]))
        head_tokens = _tokens(head)
        prefix_tokens = head_tokens + sum(_tokens(h) for h in history[:-1])
        with self._cache_lock:
            if prefix_key in self._seen:
                read, write = prefix_tokens, 0
            elif head_key in self._seen:
                read, write = head_tokens, prefix_tokens - head_tokens
            else:
                read, write = 0, prefix_tokens
            reply_text = _render(dataclasses.asdict(reply))
            self._seen.update({head_key, prefix_key, hash((head, *history, reply_text))})
        return Usage(
            input_tokens=_tokens(history[-1]) if history else 0,
            output_tokens=_tokens(reply.text)
            + sum(_tokens(_render(c.args)) for c in reply.tool_calls),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
