"""What an HTTP error body means for the next attempt: pure functions, shared by every path.

The sync, async and streaming calls of `OpenAICompatModel` all decide with these whether an
error body says the server refused one of our parameters (then the request is adapted and
sent again, spending no retry) or that the prompt does not fit the context window (never
retried), and what to quote from an error body. Whether a status is worth a retry, and how
long to wait, is the `RetryPolicy`'s (`agentloops.providers.retry`).

Rule: no I/O and no state.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from agentloops.providers import _window as window

Refusal = Literal["response_format", "max_tokens", "tool_choice"]


def context_exceeded(status: int, text: str) -> bool:
    """Whether an error body says the prompt does not fit the context window (a 400 from
    most servers; llama-cpp-python may answer 500, which must not be retried then)."""
    if status < 400 or status in (401, 403, 404, 408, 429):
        return False
    return window.too_long(text)


def refusal(status: int, text: str) -> Refusal | None:
    """Which of our parameters an error body says the server refused, if any.

    Servers differ in the status: llama-cpp-python answers 500 for a `response_format` it
    does not know, others 400 or 422. So the body decides, before any retry is spent.
    """
    if status < 400 or status in (401, 403, 404, 408, 429):
        return None
    lowered = text.lower()
    if "response_format" in lowered or "json_schema" in lowered:
        return "response_format"
    if "tool_choice" in lowered:
        return "tool_choice"  # e.g. "required", or a named function, not supported
    if status < 500 and "max_completion_tokens" in lowered:
        return "max_tokens"  # OpenAI's reasoning models: "use 'max_completion_tokens' instead"
    return None


def detail(text: str) -> str:
    """The server's own error message, or the start of its body."""
    try:
        body: Any = json.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:500]
    if isinstance(error, str):
        return error[:500]
    return json.dumps(body)[:500]
