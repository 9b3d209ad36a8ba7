"""`RetryPolicy`: when a provider sends a failed request again, and how long it waits first.

One value that both providers take (`OpenAICompatModel(retry=...)`,
`AnthropicModel(retry=...)`), so the rule is written once and can be read in docs. It
decides from what came back (a status and its headers, or no answer at all) and never
sleeps itself: the provider's sync or async path does the waiting.

Rule: no I/O, no sleeping, no provider: statuses and headers in, a decision out.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from agentloops.errors import ConfigurationError

__all__ = ["RETRY_STATUSES", "RetryPolicy"]

RETRY_STATUSES = frozenset({408, 409, 429, *range(500, 600)})
"""Request timeout, conflict, rate limited, and every 5xx (529 overloaded included)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How often to send a failed model request again, and how long to wait between tries.

    The default is what both providers did before it existed: retry 408, 409, 429 and
    every 5xx, and a request that got no answer (a refused connection, a timeout); wait
    what `Retry-After` (or `retry-after-ms`) says, capped at `max_retry_after`, else
    `backoff` seconds doubling per attempt up to `max_backoff`, cut by up to `jitter` at
    random so a batch of runs does not retry in lockstep. `x-should-retry: true|false`
    from the server overrides the status.

    Args:
        max_retries: tries after the first (0: never retry).
        backoff: the first wait, in seconds, when the server names none.
        max_backoff: the longest wait the doubling reaches.
        jitter: the fraction of each wait taken off at random (0: none).
        retry_on: the HTTP statuses worth another try.
        retry_unanswered: retry a request that got no answer (connection error, timeout).
        max_retry_after: the longest wait a `Retry-After` header can ask for.

    Examples:
        >>> policy = RetryPolicy(max_retries=5, retry_on={429, 529})
        >>> policy.retries(503), policy.retries(529)
        (False, True)
    """

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: float = 0.25
    retry_on: Collection[int] = field(default=RETRY_STATUSES)
    retry_unanswered: bool = True
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ConfigurationError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ConfigurationError("backoff, max_backoff and max_retry_after must be >= 0")
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"jitter must be between 0 and 1, got {self.jitter}")
        object.__setattr__(self, "retry_on", frozenset(self.retry_on))

    def retries(self, status: int | None, headers: Mapping[str, str] | None = None) -> bool:
        """Whether an answer with `status` (`None`: no answer) is worth another try."""
        should = headers.get("x-should-retry") if headers is not None else None
        if should in ("true", "false"):
            return should == "true"
        if status is None:
            return self.retry_unanswered
        return status in self.retry_on

    def wait(self, attempt: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait before try `attempt + 1` (attempt 0 is the first failure)."""
        if headers is not None:
            asked = retry_after(headers)
            if asked is not None and math.isfinite(asked):
                return min(max(asked, 0.0), self.max_retry_after)
        base = min(self.backoff * 2.0**attempt, self.max_backoff)
        return base * (1.0 - self.jitter * random.random())

    def next_wait(
        self,
        attempt: int,
        status: int | None,
        headers: Mapping[str, str] | None = None,
        *,
        remaining: float | None = None,
    ) -> float | None:
        """The wait before another try after failure number `attempt` (0-based), or `None`
        when the request must not be sent again: not retryable, out of retries, or (with
        `remaining`, the seconds left before a deadline) no time left to wait and try."""
        if attempt >= self.max_retries or not self.retries(status, headers):
            return None
        wait = self.wait(attempt, headers)
        if remaining is not None and wait >= remaining:
            return None
        return wait

    def worst_case(self, timeout: float) -> float:
        """The longest a call can take with this policy when each try may take `timeout`
        seconds and the server asks for no wait: every try times out, with the longest
        backoff between them."""
        waits = sum(min(self.backoff * 2.0**a, self.max_backoff) for a in range(self.max_retries))
        return (self.max_retries + 1) * timeout + waits


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a server asks for: `retry-after-ms` (milliseconds), `retry-after` (seconds
    or an HTTP date), or `None` when there is no usable header."""
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
