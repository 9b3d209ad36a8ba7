"""`MCPToolset`: the tools of one MCP server, for any loop's tools list or a `ToolRegistry`.

It owns the connection while open (`with` or `async with`), turns each listing into
`MCPTool`s (bumping `revision`, which the registry watches), and turns every way a call
can end into a `ToolOutcome`: the server's result, or an error naming the server when it
refused, died, hung past the deadline or answered something unreadable.

Rule: the public toolset knows tools, errors and its session; never a loop, a driver or
a store.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

import pydantic
from mcp import types
from mcp.shared.exceptions import MCPError

from agentloops.errors import AgentLoopsError, ConfigurationError
from agentloops.messages import ToolOutcome

from . import _results
from ._home import Home, WrongLoop
from ._session import Gone, Session, Transport
from ._tool import ApprovalChoice, MCPTool, PerTool, per_tool

if TYPE_CHECKING:
    from typing_extensions import Unpack

DEFAULT_TIMEOUT = 60.0
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNFIT = re.compile(r"[^a-zA-Z0-9_-]")
_DOUBT = ("rerun", "ask", "fail")


class MCPConnectionError(AgentLoopsError):
    """An MCP server could not be started or reached, or did not finish its handshake."""


class Options(TypedDict, total=False):
    """What `MCPToolset.stdio` and `MCPToolset.http` accept besides where the server is."""

    name: str | None
    prefix: str | None
    requires_approval: ApprovalChoice
    timeout: PerTool
    on_doubt: PerTool
    connect_timeout: float


class MCPToolset:
    """The tools of one MCP server; build it with `MCPToolset.stdio` or `MCPToolset.http`.

    Open it with `with` (the session gets an event loop on a thread of its own, so sync
    runs need no loop) or `async with` (the session lives on the caller's loop). Inside,
    the toolset stands in any loop's tools list or a `ToolRegistry`, next to plain tools.

    Args:
        name: how messages name the server (default: the name it gives, else its command
            or URL).
        prefix: put before every tool name (`prefix="files"`: `files_read`), so two
            servers' tools cannot clash; a clash is a `ConfigurationError` naming both.
        requires_approval: `None` (default): the annotations decide, so a tool marked
            `readOnlyHint` runs and any other asks a human first; `True`/`False` for every
            tool; a collection of the server's tool names that ask; or a predicate on
            (server's tool name, arguments). A loop's approval policy that denies still wins.
        timeout: seconds a call may take before it is cancelled and becomes an error
            result naming the server (`None`: no limit); one value for every tool, or a
            mapping from the server's tool names (the rest get 60 s).
        on_doubt: what a durable run does with a call that started but has no recorded
            outcome: "rerun" (the default for read-only and idempotent tools), "ask" (the
            default for the others) or "fail"; one value, or a mapping by tool name.
        connect_timeout: seconds to start the server and finish the handshake.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        where: str,
        name: str | None = None,
        prefix: str | None = None,
        requires_approval: ApprovalChoice = None,
        timeout: PerTool = DEFAULT_TIMEOUT,
        on_doubt: PerTool = None,
        connect_timeout: float = 30.0,
    ):
        _check_options(prefix, requires_approval, timeout, on_doubt, connect_timeout)
        self._transport = transport
        self._where = where
        self._name = name
        self.prefix = prefix
        self.requires_approval = requires_approval
        self.timeout = timeout
        self.on_doubt = on_doubt
        self.connect_timeout = connect_timeout
        self._tools: tuple[MCPTool, ...] = ()
        self._revision = 0
        self._home: Home | None = None
        self._session: Session | None = None
        self._opening = threading.Lock()
        self._first_listing = True

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **options: Unpack[Options],
    ) -> MCPToolset:
        """A server this toolset starts as a subprocess and talks to over stdin/stdout.

        The server gets a minimal environment (PATH, HOME, ...) plus `env`; it ends when
        the toolset closes.
        """
        from mcp.client.stdio import StdioServerParameters

        params = StdioServerParameters(
            command=command,
            args=list(args),
            env=dict(env) if env else None,
            cwd=None if cwd is None else Path(cwd),
        )
        where = " ".join([Path(command).name, *args])
        return cls(lambda _: params, where=where[:80], **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        **options: Unpack[Options],
    ) -> MCPToolset:
        """A server reached over streamable HTTP at `url`, with `headers` on every request
        (an `Authorization` header, for example)."""

        def transport(stack: AsyncExitStack) -> Any:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            client = httpx2.AsyncClient(
                headers=dict(headers or {}), timeout=httpx2.Timeout(30.0, read=300.0)
            )
            stack.push_async_callback(client.aclose)
            return streamable_http_client(url, http_client=client)

        return cls(transport, where=url.split("?")[0].rsplit("@", 1)[-1], **options)

    # -- what a registry reads ------------------------------------------------------------

    @property
    def name(self) -> str:
        """How messages name the server."""
        if self._name:
            return self._name
        info = self._session.server_info if self._session is not None else None
        return info.name if info is not None and info.name else self._where

    @property
    def source(self) -> str:
        return f"MCP server {self.name!r}"

    @property
    def revision(self) -> int:
        """Changes whenever the server's tools were listed again."""
        return self._revision

    def tools(self) -> tuple[MCPTool, ...]:
        """The server's tools as last listed (none while the toolset is closed)."""
        return self._tools

    @property
    def is_open(self) -> bool:
        return self._home is not None

    # -- opening and closing ----------------------------------------------------------------

    def __enter__(self) -> MCPToolset:
        self._check_closed()
        home = Home.on_thread(self.name)
        try:
            session = self._start(home)
        except BaseException:  # opened meanwhile by another thread
            home.close()
            raise
        try:
            home.wait(session.open(self.connect_timeout))
        except BaseException as exc:
            self._closed()
            home.close()
            self._raise_failed(exc)
        return self

    def __exit__(self, *exc: object) -> None:
        home, session = self._home, self._session
        if home is None or session is None:
            return
        try:
            home.wait(session.close())
        finally:
            self._closed()
            home.close()

    async def __aenter__(self) -> MCPToolset:
        home = Home.here()
        session = self._start(home)
        try:
            await session.open(self.connect_timeout)
        except BaseException as exc:
            self._closed()
            self._raise_failed(exc)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        home, session = self._home, self._session
        if home is None or session is None:
            return
        try:
            await home.reach(session.close())
        finally:
            self._closed()

    def _check_closed(self) -> None:
        if self._home is not None:
            raise ConfigurationError(f"{self.source} is already open")

    def _start(self, home: Home) -> Session:
        with self._opening:
            self._check_closed()
            self._session = Session(self._transport, self._listed, self.connect_timeout)
            self._home = home
            self._first_listing = True
        return self._session

    def _closed(self) -> None:
        self._home = None
        self._tools = ()
        self._revision += 1

    def _raise_failed(self, exc: BaseException) -> NoReturn:
        """Raise why opening failed: a setting's mistake or a cancellation as they are,
        anything else as an `MCPConnectionError` naming the server."""
        if isinstance(exc, ConfigurationError) or not isinstance(exc, Exception):
            raise exc
        if isinstance(exc, TimeoutError):
            why = f"no handshake within connect_timeout={self.connect_timeout} s"
        else:
            why = f"{type(exc).__name__}: {exc}"
        where = f" ({self._where})" if self._where != self.name else ""
        raise MCPConnectionError(f"{self.source}{where} could not be opened: {why}") from exc

    # -- listings ---------------------------------------------------------------------------

    def _listed(self, listed: list[types.Tool]) -> None:
        """Turn a listing into tools (called on the home loop for every listing)."""
        if self._first_listing:
            _check_names(self, [t.name for t in listed])
            self._first_listing = False
        tools: dict[str, MCPTool] = {}
        for item in listed:
            model_name = self._model_name(item.name)
            if model_name in tools:
                raise ConfigurationError(
                    f"{self.source} lists {tools[model_name].server_name!r} and {item.name!r}, "
                    f"which both become the tool name {model_name!r}"
                )
            tools[model_name] = MCPTool(
                item,
                name=model_name,
                caller=self,
                requires_approval=self.requires_approval,
                timeout=per_tool(self.timeout, item.name, DEFAULT_TIMEOUT),
                on_doubt=per_tool(self.on_doubt, item.name, None),
            )
        self._tools = tuple(tools.values())
        self._revision += 1

    def _model_name(self, server_name: str) -> str:
        name = _UNFIT.sub("_", server_name)
        if self.prefix:
            name = f"{self.prefix}_{name}"
        return name[:64] or "_"

    # -- calls ------------------------------------------------------------------------------

    def call(self, tool: MCPTool, arguments: dict[str, Any], key: str | None) -> ToolOutcome:
        """Call `tool` from a thread, waiting for the answer (what a sync run does)."""
        home, session = self._home, self._session
        if home is None or session is None:
            return self._error(f"{self.source} is not open: call {tool.name!r} inside `with`")
        try:
            result = home.wait(session.call(tool.server_name, arguments, key, tool.call_timeout))
        except WrongLoop:
            return self._error(
                f"{self.source} was opened with `async with` on the event loop this sync call "
                "would block: use the loop's arun(), or open the toolset with `with`"
            )
        except Exception as exc:
            return self._failure(tool, exc)
        return _outcome(result)

    async def acall(self, tool: MCPTool, arguments: dict[str, Any], key: str | None) -> ToolOutcome:
        """Call `tool` from async code: awaited on the session's loop, or bridged to it."""
        home, session = self._home, self._session
        if home is None or session is None:
            return self._error(f"{self.source} is not open: call {tool.name!r} inside `with`")
        try:
            call = session.call(tool.server_name, arguments, key, tool.call_timeout)
            result = await home.reach(call)
        except Exception as exc:
            return self._failure(tool, exc)
        return _outcome(result)

    def _failure(self, tool: MCPTool, exc: Exception) -> ToolOutcome:
        about = f"{self.source}, tool {tool.server_name!r}"
        if isinstance(exc, TimeoutError):
            return self._error(
                f"{about}: no answer within {tool.call_timeout} s; the call was cancelled "
                "(it may or may not have taken effect on the server)"
            )
        if isinstance(exc, Gone):
            return self._error(f"{about}: not called, {exc}")
        if isinstance(exc, MCPError):
            if exc.code == types.CONNECTION_CLOSED:
                return self._error(
                    f"{about}: the connection closed before an answer (did the server "
                    f"stop?): {exc.message}"
                )
            return self._error(f"{about}: the server refused the call: {exc.message}")
        if isinstance(exc, pydantic.ValidationError):
            problems = exc.errors(include_url=False)
            first = problems[0] if problems else {"loc": (), "msg": str(exc)}
            where = ".".join(str(p) for p in first["loc"]) or "(result)"
            return self._error(
                f"{about}: the server's answer is not a valid result ({len(problems)} "
                f"problem(s); first: {where}: {first['msg']})"
            )
        return self._error(f"{about}: the call failed: {type(exc).__name__}: {exc}")

    @staticmethod
    def _error(text: str) -> ToolOutcome:
        return ToolOutcome(content=text, is_error=True)

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"MCPToolset({self.name!r}, {state}, {len(self._tools)} tools)"


def _outcome(result: types.CallToolResult) -> ToolOutcome:
    text, is_error = _results.rendered(result)
    return ToolOutcome(content=text, is_error=is_error)


def _check_options(
    prefix: str | None,
    requires_approval: ApprovalChoice,
    timeout: PerTool,
    on_doubt: PerTool,
    connect_timeout: float,
) -> None:
    if prefix is not None and not _NAME.match(prefix):
        raise ConfigurationError(f"prefix must match {_NAME.pattern}, got {prefix!r}")
    if isinstance(requires_approval, str) or not (
        requires_approval is None
        or isinstance(requires_approval, bool | Collection)
        or callable(requires_approval)
    ):
        raise ConfigurationError(
            "requires_approval must be None, a bool, a collection of tool names or a "
            f"predicate on (name, arguments), got {requires_approval!r:.60}"
        )
    for value in timeout.values() if isinstance(timeout, Mapping) else [timeout]:
        if value is not None and (not isinstance(value, int | float) or value <= 0):
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {value!r}")
    for value in on_doubt.values() if isinstance(on_doubt, Mapping) else [on_doubt]:
        if value is not None and value not in _DOUBT:
            raise ConfigurationError(f"on_doubt must be 'rerun', 'ask' or 'fail', got {value!r}")
    if connect_timeout <= 0:
        raise ConfigurationError(f"connect_timeout must be > 0, got {connect_timeout}")


def _check_names(toolset: MCPToolset, listed: list[str]) -> None:
    """Tool names given in the settings must be tools the server lists."""
    named: set[str] = set()
    for setting in (toolset.timeout, toolset.on_doubt):
        if isinstance(setting, Mapping):
            named.update(setting)
    choice = toolset.requires_approval
    if isinstance(choice, Collection) and not isinstance(choice, bool | str):
        named.update(choice)
    unknown = sorted(named - set(listed))
    if unknown:
        raise ConfigurationError(
            f"{toolset.source} lists no tool {', '.join(map(repr, unknown))}; "
            f"it lists: {', '.join(listed) or '(none)'}"
        )
