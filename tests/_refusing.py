"""A default executor that refuses work, for the tests that show agentloops asks nothing of
the event loop's default executor under asyncio (issue 19's bug 2)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any


class Refusing(concurrent.futures.ThreadPoolExecutor):
    """A default executor that refuses work: nothing a run does may need it."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the event loop's default executor was asked to run {fn!r}")
