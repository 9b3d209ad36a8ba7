"""What an HTTP answer means for the next attempt: pure functions, shared by every path.

The sync, async and streaming calls of `OpenAICompatModel` all decide with these: whether a
status is worth a retry and how long to wait, whether an error body says the server refused
one of our parameters (then the request is adapted and sent again, spending no retry), and
what to quote from an error body.

Rule: no I/O and no state.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from typing import Any, Literal

MAX_WAIT = 60.0
"""The longest wait between two attempts, whatever `Retry-After` says."""

Refusal = Literal["response_format", "max_tokens"]


def retryable(status: int) -> bool:
    """408, 409, 429 and every 5xx (520 and 529 included) are worth another attempt."""
    return status in (408, 409, 429) or 500 <= status <= 599


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
    if status < 500 and "max_completion_tokens" in lowered:
        return "max_tokens"  # OpenAI's reasoning models: "use 'max_completion_tokens' instead"
    return None


def backoff(attempt: int, headers: Mapping[str, str] | None) -> float:
    """`Retry-After` (seconds, milliseconds or a date) when the server sends one, capped at
    a minute; else 0.5 s doubling per attempt up to 8 s, with jitter so a batch of runs
    does not retry in lockstep."""
    if headers is not None:
        wait = _retry_after(headers)
        if wait is not None:
            return min(max(wait, 0.0), MAX_WAIT)
    return min(0.5 * 2.0**attempt, 8.0) * random.uniform(0.75, 1.0)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    import email.utils  # rare, and it pulls in the socket module

    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
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
