"""A tool whose own `await` raises `CancelledError` (it awaits work someone else
cancelled), shared by the registry's and the drivers' tests of issue 19's bug 1."""

from __future__ import annotations

import asyncio

from agentloops import tool


@tool
async def shaky() -> str:
    """Awaits work that someone else cancelled: its own `await` raises CancelledError."""
    work = asyncio.get_running_loop().create_future()
    work.cancel()
    await work
    return "never"  # pragma: no cover
