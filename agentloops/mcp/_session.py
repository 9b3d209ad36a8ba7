"""One client session with an MCP server, kept open by a task on its home event loop.

The SDK's `mcp.Client` does the protocol (it negotiates the 2026 protocol or falls back to
the `initialize` handshake). This module opens it, lists the tools (every page), re-lists
them when the server says they changed (`notifications/tools/list_changed`, or a
`subscriptions/listen` stream where the protocol has one), calls a tool with a deadline
and a `_meta`, and closes it in the task that opened it, as anyio requires. It knows
nothing of agentloops' tools: its listings go to `on_listing`.

Rule: the SDK's client and its protocol; no `Tool`, registry, loop or driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any, cast

import anyio
from mcp import Client, types
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

logger = logging.getLogger("agentloops.mcp")

KEY_META = "agentloops/idempotency-key"
"""Where a call's idempotency key goes in the request's `_meta`."""

MAX_PAGES = 100
"""Pages of `tools/list` read before a listing is taken as complete."""

Transport = Callable[[AsyncExitStack], Any]
"""Builds what `mcp.Client` connects through (a transport, or stdio parameters); it may
enter resources (an HTTP client) on the stack, which closes them with the session."""


class Gone(Exception):
    """The session is closed, or was lost; the message says which and why."""


class Session:
    """A live session, driven from its home loop; `on_listing` gets every tools listing."""

    def __init__(
        self,
        transport: Transport,
        on_listing: Callable[[list[types.Tool]], None],
        list_timeout: float,
    ):
        self._transport = transport
        self._on_listing = on_listing
        self._list_timeout = list_timeout
        self._client: Client | None = None
        self._closing: asyncio.Event | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._relisting: asyncio.Task[None] | None = None
        self._stale = False
        self.lost: str | None = None
        """Why the session ended while open (`None` while it lives or after `close`)."""
        self.server_info: types.Implementation | None = None

    async def open(self, timeout: float) -> None:
        """Connect, list the tools, and start listening for changes.

        Raises:
            Exception: whatever stopped the connection (the toolset words it).
        """
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._keeper = asyncio.create_task(self._keep(opened), name="agentloops-mcp-session")
        try:
            with anyio.fail_after(timeout):
                await asyncio.shield(opened)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """End the session (and the server process, for stdio); never raises for it."""
        if self._closing is not None:
            self._closing.set()
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            if not self._client:  # still connecting: nothing to wait for
                keeper.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await keeper

    async def call(
        self, name: str, arguments: dict[str, Any], key: str | None, timeout: float | None
    ) -> types.CallToolResult:
        """Call a tool; its result comes back once any re-listing that the server's
        notifications started meanwhile is done, so the next model call sees it.

        Raises:
            Gone: the session is closed or was lost.
            TimeoutError: no answer within `timeout` seconds (the call is cancelled).
            Exception: what the SDK raised (an `MCPError`, a malformed result).
        """
        client = self._client
        if client is None:
            raise Gone(self.lost or "the toolset is not open")
        meta = cast(types.RequestParamsMeta, {KEY_META: key}) if key is not None else None
        with anyio.fail_after(timeout):
            result = await client.call_tool(name, arguments, meta=meta)
        relisting = self._relisting
        if relisting is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(relisting), self._list_timeout)
        return result

    async def _keep(self, opened: asyncio.Future[None]) -> None:
        """The session's life, in one task: connect, serve until closed, disconnect."""
        assert self._closing is not None
        try:
            async with AsyncExitStack() as stack:
                client = Client(
                    self._transport(stack),
                    cache=None,  # a listing is read when the server says it changed
                    message_handler=self._on_message,
                    client_info=types.Implementation(name="agentloops", version=_version()),
                )
                await stack.enter_async_context(client)
                self.server_info = client.server_info
                await self._list(client)
                group = await stack.enter_async_context(anyio.create_task_group())
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS and _announces(client):
                    group.start_soon(self._listen, client)
                self._client = client
                opened.set_result(None)
                await self._closing.wait()
                group.cancel_scope.cancel()
        except asyncio.CancelledError:
            opened.cancel()
            raise
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(_leaf(exc))
            elif not self._closing.is_set():
                self.lost = f"the connection was lost: {_said(_leaf(exc))}"
                logger.warning("MCP session lost: %s", self.lost)
        finally:
            if self._client is not None and not self._closing.is_set():
                self.lost = self.lost or "the connection was lost"
            self._client = None

    async def _list(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._on_listing(tools)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed()
        elif isinstance(message, Exception):  # a line the server wrote that is not JSON-RPC
            logger.warning("MCP server sent something unreadable: %s", _said(message))

    async def _listen(self, client: Client) -> None:
        """Hold a `subscriptions/listen` stream open (2026 protocol): its events are what
        tell this client the tools changed."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._changed()
        except Exception as exc:  # the server offers no stream after all: no live updates
            logger.info("MCP server gives no tools/list_changed stream: %s", _said(exc))

    def _changed(self) -> None:
        """Re-list soon; changes that arrive during a re-listing cause one more."""
        self._stale = True
        if self._relisting is None:
            self._relisting = asyncio.get_running_loop().create_task(self._relist())

    async def _relist(self) -> None:
        try:
            while self._stale and self._client is not None:
                self._stale = False
                with anyio.fail_after(self._list_timeout):
                    await self._list(self._client)
        except Exception as exc:  # the old listing stays; the next change tries again
            logger.warning("MCP server's tools could not be re-listed: %s", _said(exc))
        finally:
            self._relisting = None


def _version() -> str:
    """Our distribution's version, for the server's logs (the facade is a layer above)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentloops-kit")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def _announces(client: Client) -> bool:
    tools = client.server_capabilities.tools
    return tools is not None and tools.list_changed is True


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    inner = getattr(exc, "exceptions", None)  # BaseExceptionGroup (a backport on 3.10)
    while isinstance(inner, tuple) and inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return exc


def _said(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
