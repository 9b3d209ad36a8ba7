"""One tool a server lists, as a `Tool` the registry and the loops handle like our own.

Its schema and description are the server's, as listed; its arguments are checked against
that schema before the call; its annotations set the defaults for read-only, approval and
calls in doubt. Calling it goes through its toolset's session (`Caller`), from a thread
(`fn`) or from the event loop (`async_fn`), and always ends in a `ToolOutcome`.

Rule: a tool knows its listing, its settings and its `Caller`; never the session or how a
call reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any, Protocol, Union

import pydantic
from mcp import types

from agentloops.messages import ToolOutcome
from agentloops.tools import DoubtPolicy, Tool, idempotency_key

from . import _schema

ApprovalChoice = Union[bool, Collection[str], Callable[[str, dict[str, Any]], object], None]  # noqa: UP007
"""`requires_approval` on a toolset: `None` lets the annotations decide (read-only tools run,
any other asks), `True`/`False` decide for every tool, a collection names the tools that
ask, a predicate on (server's tool name, arguments) decides per call."""

PerTool = Union[Any, Mapping[str, Any]]  # noqa: UP007
"""A setting for every tool, or a mapping from the server's tool names to it."""


class Caller(Protocol):
    """What an MCP tool calls through: its toolset."""

    def call(self, tool: MCPTool, arguments: dict[str, Any], key: str | None) -> ToolOutcome: ...

    def acall(
        self, tool: MCPTool, arguments: dict[str, Any], key: str | None
    ) -> Coroutine[Any, Any, ToolOutcome]: ...


class _AnyArguments(pydantic.BaseModel):
    """Stands in for an arguments model: the server's JSON Schema is the check."""

    model_config = pydantic.ConfigDict(extra="allow")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}  # replaced by the server's schema; building pydantic's costs a listing dearly


class MCPTool(Tool):
    """A tool of an MCP server, under the name the model sees (prefixed, if asked).

    `server_name` is the tool's name on the server and `annotations` its listed hints;
    `call_timeout` bounds each call (the toolset words the timeout, naming the server).
    """

    def __init__(
        self,
        listed: types.Tool,
        *,
        name: str,
        caller: Caller,
        requires_approval: ApprovalChoice,
        timeout: float | None,
        on_doubt: DoubtPolicy | None,
    ):
        hints = listed.annotations or types.ToolAnnotations()
        read_only = hints.read_only_hint is True
        if on_doubt is None and (read_only or hints.idempotent_hint is True):
            on_doubt = "rerun"  # running it again changes nothing more
        super().__init__(
            self._call,
            name=name,
            description=listed.description or listed.title or hints.title or listed.name,
            args_model=_AnyArguments,
            read_only=read_only,
            requires_approval=_rule(listed.name, read_only, requires_approval),
            on_doubt=on_doubt,
        )
        self.server_name = listed.name
        self.annotations = hints
        self.input_schema = dict(listed.input_schema)
        self.call_timeout = timeout
        self.async_fn = self._acall
        self._caller = caller
        self._check: Any = None  # compiled at the first call: a 300-tool listing stays quick

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as given, once the server's schema accepts them.

        Raises:
            pydantic.ValidationError: one entry per field the schema refuses.
        """
        check = self._check
        if check is None:
            check = self._check = _schema.validator(self.input_schema) or False
        if check is not False:
            _schema.check(check, args, self.name)
        return args

    def _call(self, **arguments: Any) -> ToolOutcome:
        return self._caller.call(self, arguments, idempotency_key())

    async def _acall(self, **arguments: Any) -> ToolOutcome:
        return await self._caller.acall(self, arguments, idempotency_key())

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            f"MCP tool {self.name!r} holds a live connection to its server and cannot be "
            "sent to another process; run it on threads (the default executor)"
        )


def _rule(name: str, read_only: bool, choice: ApprovalChoice) -> Any:
    """The `requires_approval` of one tool, from the toolset's choice and its annotations."""
    if choice is None:
        return not read_only
    if isinstance(choice, bool):
        return choice
    if callable(choice):
        predicate = choice
        return lambda args: predicate(name, args)
    return name in choice


def per_tool(setting: PerTool, name: str, default: Any) -> Any:
    """The value of a per-tool setting for the server's tool `name`."""
    if isinstance(setting, Mapping):
        return setting.get(name, default)
    return setting
