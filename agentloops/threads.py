"""How agentloops uses threads under asyncio: the size of its own pool, and how long a
sync-only model client may take (`configure_threads`, `ThreadSettings`).

Under `arun`, a sync-only model client, a plain `def` tool and a store's blocking calls run
on agentloops' own bounded pool of daemon threads (`agentloops._pool`), never on the event
loop's default executor: a run needs no executor to start, the number of threads does not
grow with the number of runs, and a call that hangs never keeps the process from exiting.

Rule: settings only; it imports nothing from agentloops.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

__all__ = ["ENVIRONMENT", "ThreadSettings", "configure_threads", "settings"]

_DEFAULT_MAX_THREADS = 32

ENVIRONMENT = "AGENTLOOPS_MAX_THREADS"
"""The environment variable that sets the pool's size when `configure_threads` has not
(read when the pool is first used, never at import)."""


@dataclass(frozen=True, slots=True)
class ThreadSettings:
    """How agentloops uses threads under asyncio (see `configure_threads`)."""

    max_threads: int = _DEFAULT_MAX_THREADS
    """Threads of the shared pool working at once for callers that wait (sync model clients
    and sync tools under `arun`, a store's blocking calls). Calls beyond it queue."""
    model_timeout: float = 600.0
    """Seconds `arun` waits for a sync-only model client's `complete` before it raises
    `ModelError` (the call's thread is abandoned: it finishes, or not, on its own)."""


_settings: ThreadSettings | None = None
_settings_lock = threading.Lock()


def settings() -> ThreadSettings:
    """The settings in force: `configure_threads`'s, or the defaults (with
    `AGENTLOOPS_MAX_THREADS` read the first time)."""
    global _settings
    if _settings is None:
        with _settings_lock:
            if _settings is None:
                _settings = ThreadSettings(max_threads=_from_environment())
    return _settings


def _from_environment() -> int:
    text = os.environ.get(ENVIRONMENT, "")
    if not text:
        return _DEFAULT_MAX_THREADS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ENVIRONMENT} must be a whole number >= 1, got {text!r}")
    return value


def configure_threads(
    *, max_threads: int | None = None, model_timeout: float | None = None
) -> ThreadSettings:
    """Set how agentloops uses threads under asyncio, and return the settings in force.

    Args:
        max_threads: the shared pool's size: how many sync model calls, sync tool calls
            and blocking store calls run at once under `arun`, for the whole process
            (default 32, or `AGENTLOOPS_MAX_THREADS`). More wait their turn; the thread
            count never grows with the number of runs.
        model_timeout: seconds `arun` waits for a sync-only client's `complete` (default
            600) before the call fails with `ModelError`.

    Called with no arguments, it only reports. Threads already started are kept; a smaller
    `max_threads` takes effect as they finish.

    Raises:
        ValueError: `max_threads` < 1 or `model_timeout` <= 0.

    Examples:
        >>> from agentloops import configure_threads
        >>> configure_threads().max_threads >= 1
        True
    """
    global _settings
    if max_threads is not None and (isinstance(max_threads, bool) or max_threads < 1):
        raise ValueError(f"max_threads must be >= 1, got {max_threads!r}")
    if model_timeout is not None and not model_timeout > 0:
        raise ValueError(f"model_timeout must be > 0 seconds, got {model_timeout!r}")
    current = settings()
    with _settings_lock:
        _settings = ThreadSettings(
            max_threads=current.max_threads if max_threads is None else max_threads,
            model_timeout=current.model_timeout if model_timeout is None else model_timeout,
        )
        return _settings
