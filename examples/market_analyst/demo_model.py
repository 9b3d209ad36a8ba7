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
import re
import threading
from typing import Any

from agentloops import Message, ModelRequest, ModelResponse, Usage
from agentloops.testing import FunctionModel, respond, respond_structured, use_tools
from market_analyst import recommend, writers
from market_analyst.roles import role_of

MODEL_NAME = "offline-demo (deterministic stand-in)"
BANNER = (
    "Offline demo model: a deterministic stand-in, not a language model. It routes, plans, "
    "writes and votes by rules applied to the requests it receives, so every loop, tool "
    "call and checkpoint below is real, but the judgement is canned and token counts are "
    "estimates. For a real model set ANTHROPIC_API_KEY (Claude), or pass "
    "--base-url http://localhost:11434/v1 --model qwen3:8b (Ollama or any "
    "OpenAI-compatible server)."
)


_UNCLEAR = (
    re.compile(r"when the request is unclear, choose (\w+)", re.I),
    re.compile(r"^- (\w+):[^\n]*\bunclear\b", re.M | re.I),
)


def _message_text(request: ModelRequest) -> str:
    """The user-visible text of the transcript: text blocks and tool results."""
    parts = []
    for message in request.messages:
        for block in message.content:
            parts.append(getattr(block, "text", None) or getattr(block, "content", "") or "")
    return "\n".join(p for p in parts if p)


def _tool_output_text(request: ModelRequest) -> str:
    return "\n".join(r.content for m in request.messages for r in m.tool_results)


def _first_user_text(request: ModelRequest) -> str:
    return request.messages[0].text if request.messages else ""


def task_of(request: ModelRequest) -> str:
    """The user's request inside a component's prompt: a <task> block or a "Task:" line
    (even a blank one: nothing is read into it), else the first user message."""
    text = _first_user_text(request)
    task = _labelled(text, "task")
    return text if task is None else task


def _labelled(text: str, label: str) -> str | None:
    """The inside of `<label>...</label>`, or the text after a line-leading `Label:` up to
    the next blank line; None when neither is there."""
    tagged = re.search(rf"<{label}>\s*(.*?)\s*</{label}>", text, re.S | re.I)
    if tagged:
        return tagged.group(1)
    line = re.search(rf"^{label}:[ \t]*(.*?)(?:\n\s*\n|\Z)", text, re.S | re.I | re.M)
    return line.group(1).strip() if line else None


def _memory(request: ModelRequest) -> str:
    """The investor profile and last-report blocks, wherever the prompt carries them."""
    text = f"{request.system}\n{_first_user_text(request)}"
    blocks = (_labelled(text, label) for label in ("investor_profile", "last_report"))
    return "\n".join(b for b in blocks if b)


def _unclear_route(request: ModelRequest) -> str:
    """The route the router's prompt names for unclear requests (else the flash route)."""
    for pattern in _UNCLEAR:
        found = pattern.search(request.system) or pattern.search(_first_user_text(request))
        if found:
            return found.group(1)
    return writers.FLASH


def answer(request: ModelRequest) -> ModelResponse:
    """The stand-in's answer to one request, by role."""
    role = role_of(request)
    task = task_of(request)
    if role == "router":
        return respond_structured(writers.route(task, unclear=_unclear_route(request)))
    if role == "rewoo_planner":
        return respond_structured(writers.rewoo_plan(task, _memory(request)))
    if role == "planner":
        return respond_structured(writers.deep_plan(task, _memory(request)))
    if role == "replanner":
        return respond_structured(recommend.revision(_first_user_text(request)))
    if role in ("solver", "reporter") and request.output is not None:  # the typed report
        text = _first_user_text(request)
        return respond_structured(recommend.report(task, text, _memory(request)))
    if role == "evaluator":
        text = _first_user_text(request)
        draft, evidence = _labelled(text, "draft") or "", _labelled(text, "evidence") or ""
        return respond_structured(recommend.verdict(draft, evidence))
    if role == "trader":  # a price look-up, one trade, then what happened
        results = {r.call_id: r.content for m in request.messages for r in m.tool_results}
        made = [
            (c.name, c.args, results.get(c.id, "")) for m in request.messages for c in m.tool_calls
        ]
        kind, move = recommend.trade(_first_user_text(request), made)
        return use_tools(move) if kind == "call" else respond(move)
    if role == "executor":  # one Plan-and-Execute step: its look-ups at once, then findings
        if not request.messages[-1].tool_results:
            step = _labelled(_first_user_text(request), r"your step[^:\n]*") or task
            return use_tools(*writers.step_calls(step, task))
        findings = writers.findings(_tool_output_text(request))
        return respond("\n".join(f"- {x}" for x in findings) or "- No findings.")
    if role == "agent":  # a ReAct agent on the whole task: one look-up per turn, then the draft
        made = [(c.name, c.args) for m in request.messages for c in m.tool_calls]
        todo = [c for c in writers.step_calls("", task) if c not in made]
        if todo:
            return use_tools(todo[0])
        return respond(writers.draft(task, _tool_output_text(request)))
    if role == "reporter":
        return respond(writers.deep_report(task, _message_text(request)))
    return respond(writers.flash_briefing(task, _message_text(request)))


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
