"""Tools: plain functions with type hints, and the registry that calls them safely.

`ToolRegistry.call` and `await ToolRegistry.acall` never raise for a tool's own failure.
An unknown name, bad arguments, an exception, a value that cannot become text, a
timeout or an over-long output all come back as an `is_error` outcome whose text
(capped like any output) the model can act on.

Rule: tools know the vocabulary below them (messages, model's `ToolSpec`, errors) and no
driver, store or loop.
"""

from __future__ import annotations

import contextvars
import copy
import importlib
import re
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    Protocol,
    TypedDict,
    Union,
    overload,
    runtime_checkable,
)

import pydantic

from agentloops._validation import field_errors
from agentloops.errors import ConfigurationError, ModelRetry
from agentloops.messages import ToolCall, ToolOutcome, _outcome
from agentloops.model import ToolSpec
from agentloops.tools._runtime import TimedOut, ToolRuntime, own_cancel
from agentloops.tools._schema import arguments_model, is_async
from agentloops.tools._text import capped, describe, to_text
from agentloops.tools.cache import ToolCache

if TYPE_CHECKING:  # defaults let a bare `Tool` mean `Tool[..., Any]`
    from typing_extensions import ParamSpec, TypeVar, Unpack

    P = ParamSpec("P", default=...)
    R = TypeVar("R", default=Any)
else:
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

Decision = Literal["allow", "deny", "ask"]
ApprovalPolicy = Callable[[ToolCall], Decision]
"""Decides per call: run it, refuse it, or pause for a human."""

DoubtPolicy = Literal["rerun", "ask", "fail"]
"""What a durable run does with a call in doubt (see `Tool.on_doubt`)."""

_CALL_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentloops_call_key", default=None
)


def idempotency_key() -> str | None:
    """The idempotency key of the tool call running now, or `None` outside a loop's call.

    The same on every run of the call, a re-run after a crash included (a durable run
    replays the machine that made it), and unique within the run: pass it to the system
    a side-effecting tool changes, so that system can refuse to do the work twice.
    """
    return _CALL_KEY.get()


ApprovalRule = Union[bool, Callable[[dict[str, Any]], object]]  # noqa: UP007 (a runtime alias)
"""`requires_approval`: always (`True`), never (`False`), or a predicate on the call's
arguments (validated, defaults filled in) that answers whether to ask a human."""

INVALID_ARGUMENTS = "__invalid_arguments__"
"""The key a provider puts in `ToolCall.args` when the model's arguments did not parse
(`{INVALID_ARGUMENTS: "what was wrong"}`): the registry answers with that problem as an
error result and never runs the tool."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ATOMS = frozenset({str, int, float, bool, type(None)})


class ToolOptions(TypedDict, total=False):
    """A tool's nine options, spelled once: `tool()`, `Tool.from_function` and `Tool` take
    them as keywords, and each may be left out (its default is given below).

    Examples:
        >>> def pay(amount: int) -> str:
        ...     '''Pay an amount.'''
        ...     return "paid"
        >>> careful: ToolOptions = {"read_only": False, "requires_approval": True}
        >>> tool(pay, **careful).on_doubt
        'ask'
    """

    name: str | None
    """What the model calls it (default: the function's `__name__`); 1 to 64 of
    `a-z A-Z 0-9 _ -`, as every provider accepts."""
    description: str | None
    """What the model reads about it (default: the docstring without its `Args:` section)."""
    read_only: bool
    """It changes nothing outside the process (default True)."""
    requires_approval: ApprovalRule
    """Ask a human before a call: never (default False), always (True), or when a predicate
    on the call's arguments says so."""
    timeout: float | None
    """Seconds a call may take before it becomes an error outcome (default None: no limit)."""
    concurrent: bool
    """False: one call at a time, across every registry, loop and driver (default True)."""
    on_doubt: DoubtPolicy | None
    """What a durable run does with a call that started but has no recorded outcome:
    "rerun", "ask" or "fail" (default None: "rerun" for a read-only tool that never needs
    approval, "ask" for any other)."""
    retries: int
    """How many times in a row a run lets this tool ask for a retry by raising `ModelRetry`
    (default 1); past it the call's result says its retries are spent."""
    cache: ToolCache | None
    """Keep its results for the same arguments (`ToolCache(ttl=...)`; default None: never);
    a read-only tool's only. Error results are never kept."""


_OPTIONS = frozenset(ToolOptions.__annotations__)


class Tool(Generic[P, R]):
    """A function the model may call, with the JSON Schema of its arguments.

    Build one with the `tool` decorator or `Tool.from_function` (the same thing), giving
    any of the `ToolOptions` as keywords. A `Tool` is still callable like the function it
    wraps, with the same signature (for type checkers too).

    Args:
        fn: the function, sync or `async def`, every parameter with a type hint.
        args_model: the pydantic model of its arguments (default: read from `fn`'s hints).
        **options: the `ToolOptions`.

    Raises:
        ConfigurationError: a parameter without a type hint, `*args`/`**kwargs`, a name the
            providers reject, a non-positive timeout, a `requires_approval` that is neither
            a bool nor callable, an unknown `on_doubt`, or `retries` not an int >= 0.
        TypeError: an option that is not one of the `ToolOptions`.
    """

    hosted = False
    """True for a tool whose calls a loop's driver runs as sub-runs of another loop (an
    agent tool, `loop.as_tool(...)`, or a handoff) instead of calling its function."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        args_model: type[pydantic.BaseModel] | None = None,
        **options: Unpack[ToolOptions],
    ):
        unknown = options.keys() - _OPTIONS
        if unknown:
            raise TypeError(f"unknown tool options {sorted(unknown)}; known: {sorted(_OPTIONS)}")
        name = options.get("name") or fn.__name__
        read_only = options.get("read_only", True)
        requires_approval = options.get("requires_approval", False)
        timeout = options.get("timeout")
        on_doubt = options.get("on_doubt")
        retries = options.get("retries", 1)
        cache = options.get("cache")
        _check(name, requires_approval, timeout, on_doubt, retries)
        if cache is not None and not (isinstance(cache, ToolCache) and read_only):
            raise ConfigurationError(
                f"tool {name!r}: cache= takes a ToolCache, for a read-only tool only"
            )
        summary = ""
        if args_model is None:
            args_model, summary = arguments_model(fn, name)
        self.fn = fn
        self.name = name
        self.description = options.get("description") or summary or name
        self.args_model = args_model
        self.read_only = read_only
        self.requires_approval = requires_approval
        """`True`, `False`, or a predicate on the arguments; ask with `needs_approval`."""
        self.timeout = timeout
        self.concurrent = options.get("concurrent", True)
        """`False`: one call at a time, across every registry, loop and driver."""
        self.on_doubt: DoubtPolicy = on_doubt or (
            "rerun" if read_only and requires_approval is False else "ask"
        )
        """What a durable run does with a call of this tool that started but has no
        recorded outcome (the process died during it): run it again with the same
        idempotency key, ask a human, or fail the run. Default: "rerun" for a read-only
        tool that never needs approval, "ask" for any other."""
        self.retries = retries
        """How many times in a row a run lets this tool ask for a retry (`ModelRetry`);
        past it the call's result says its retries are spent."""
        self.cache = cache
        """Where its results are kept for the same arguments (`None`: nowhere)."""
        self._options: ToolOptions = {**options, "name": name, "description": self.description}
        """What it was built with, names resolved: how it is rebuilt in another process."""
        self.is_async = is_async(fn)
        self.async_fn: Callable[..., Coroutine[Any, Any, Any]] | None = None
        """An async twin of a sync `fn`, which `acall` awaits instead of running `fn` on a
        thread (a tool whose work lives on an event loop, as an MCP session does)."""
        self.input_schema: dict[str, Any] = args_model.model_json_schema()
        self.input_schema.pop("title", None)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__doc__ = fn.__doc__
        self._validate = args_model.__pydantic_validator__.validate_python
        self._runtime = ToolRuntime(concurrent=self.concurrent)

    @classmethod
    def from_function(cls, fn: Callable[P, R], **options: Unpack[ToolOptions]) -> Tool[P, R]:
        """Build a tool from a function's signature, type hints and docstring (the same as
        `Tool(fn, **options)`).

        `fn` may be an `async def` function: `ToolRegistry.acall` awaits it on the
        event loop, and `ToolRegistry.call` runs it to completion. Raises as `Tool` does.
        """
        return cls(fn, **options)

    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.input_schema)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments for the function; raises `pydantic.ValidationError`."""
        return self._validate(args).__dict__  # type: ignore[no-any-return]

    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with these arguments must wait for a human.

        A predicate gets the arguments as the function would (validated, defaults filled
        in, a copy it may not change). Arguments that fail validation, or a predicate
        that raises, mean "ask": the safe side.
        """
        rule = self.requires_approval
        if not callable(rule):
            return bool(rule)
        try:
            return bool(rule(self.validate(_copied(dict(args)))))
        except Exception:
            return True

    @property
    def abandoned_threads(self) -> int:
        """Calls that timed out (or were cancelled) whose threads are still running."""
        return self._runtime.abandoned

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # A decorated module-level function is shadowed by its Tool: pickle it by name.
        by_name = self._by_name()
        if by_name is not None:
            return (_lookup, by_name)
        return (_rebuild, (self.fn, self._options))

    def _by_name(self) -> tuple[str, str] | None:
        """`(module, qualname)` when this tool pickles by name, else `None` (by value)."""
        module, qualname = getattr(self.fn, "__module__", None), self.fn.__qualname__
        return (module, qualname) if module and _find(module, qualname) is self else None


def _find(module: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _lookup(module: str, qualname: str) -> Any:
    """Where a tool pickled by name is found again (in the receiving process)."""
    obj: Any = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise AttributeError(
                f"tool {qualname!r} is not defined in module {module!r} in this process "
                f"(was it defined under `if __name__ == '__main__':`?); define tools in a "
                f"module every process can import"
            )
        obj = getattr(obj, part)
    return obj


def _rebuild(fn: Callable[..., Any], options: ToolOptions) -> Tool:
    """A tool pickled by value, built again in the receiving process."""
    return Tool(fn, **options)


@overload
def tool(fn: Callable[P, R], **options: Unpack[ToolOptions]) -> Tool[P, R]: ...


@overload
def tool(
    fn: None = None, **options: Unpack[ToolOptions]
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(fn: Callable[..., Any] | None = None, **options: Unpack[ToolOptions]) -> Any:
    """Turn a typed function (sync or `async def`) into a `Tool`, with or without options
    (the `ToolOptions`, as keywords). A tool may raise `ModelRetry("what to do instead")`:
    the model gets that message as an error result and may call again, `retries` times in
    a row (then the result says they are spent).

    The result keeps the function's signature for type checkers: `Tool[P, R]`.

    Examples:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.input_schema["required"]
        ['a', 'b']
        >>> add(2, 3)
        5
        >>> @tool(read_only=False, requires_approval=True)
        ... def send(to: str) -> str:
        ...     '''Send a message.'''
        ...     return "sent"
        >>> send.requires_approval, send.on_doubt
        (True, 'ask')
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, **options)

    return wrap(fn) if fn is not None else wrap


def _check(
    name: str,
    requires_approval: ApprovalRule,
    timeout: float | None,
    on_doubt: object,
    retries: object,
) -> None:
    """Raise `ConfigurationError` for an option a tool cannot have."""
    if not _NAME.match(name):
        raise ConfigurationError(f"tool {name!r} must match {_NAME.pattern}")
    if timeout is not None and timeout <= 0:
        raise ConfigurationError(f"tool {name!r}: timeout must be > 0, got {timeout}")
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise ConfigurationError(
            f"tool {name!r}: requires_approval must be a bool or a predicate on the "
            f"arguments, got {requires_approval!r:.60}"
        )
    if on_doubt not in (None, "rerun", "ask", "fail"):
        raise ConfigurationError(
            f"tool {name!r}: on_doubt must be 'rerun', 'ask' or 'fail', got {on_doubt!r}"
        )
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ConfigurationError(f"tool {name!r}: retries must be an int >= 0, got {retries!r}")


def _copied(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments the tool may change freely: the transcript, the plan and what a human
    approved keep theirs. Flat scalar arguments need no copy (validation makes a new dict)."""
    for value in args.values():
        if type(value) not in _ATOMS:
            return copy.deepcopy(args)
    return args


_UNCACHED: Any = ToolCache()
"""Given as `cache=` by a cached call to run the tool itself (never read or written)."""


@runtime_checkable
class Toolset(Protocol):
    """Tools from elsewhere (an MCP server) whose set may change while a loop runs.

    A registry re-reads `tools()` whenever `revision` changed since it last looked.
    """

    @property
    def source(self) -> str:
        """Where the tools come from, for messages ("MCP server 'files'")."""
        ...

    @property
    def revision(self) -> int:
        """Changes whenever `tools()` would answer differently."""
        ...

    def tools(self) -> Sequence[Tool]: ...


class ToolRegistry:
    """The tools a loop may call, by name.

    Args:
        tools: `Tool`s, plain typed functions (wrapped with `Tool.from_function`), and
            toolsets (an `agentloops.mcp.MCPToolset`), whose tools are re-read whenever
            they change; a name two of them share is a `ConfigurationError` naming both.
        max_output_chars: longer outputs (and error texts) are cut to head and tail with
            a marker and returned as an error, so the model narrows its request.
        max_abandoned_threads: per tool, how many timed-out calls may still be running on
            abandoned threads; past it, new calls of that tool are refused with an error
            outcome until some finish.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any] | Toolset] = (),
        *,
        max_output_chars: int = 50_000,
        max_abandoned_threads: int = 4,
    ):
        if max_output_chars < 200:
            raise ConfigurationError(f"max_output_chars must be >= 200, got {max_output_chars}")
        if max_abandoned_threads < 1:
            raise ConfigurationError(
                f"max_abandoned_threads must be >= 1, got {max_abandoned_threads}"
            )
        self.max_output_chars = max_output_chars
        self.max_abandoned_threads = max_abandoned_threads
        self._tools: dict[str, Tool] = {}
        self._own = self._tools  # the tools registered one by one (all of them, no toolset)
        self._toolsets: list[Toolset] = []
        self._seen: tuple[int, ...] | None = ()
        self._revision = 0
        self._specs: list[ToolSpec] | None = None
        self._asking: frozenset[str] | None = None
        self._hosted: frozenset[str] | None = None
        for t in tools:
            if isinstance(t, Toolset) and not isinstance(t, Tool):
                self.add_toolset(t)
            else:
                self.register(t)

    def register(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool; a second tool with the same name is a `ConfigurationError`."""
        if not isinstance(t, Tool):
            if not callable(t):
                raise ConfigurationError(f"not a tool, a function or a toolset: {t!r}")
            t = Tool.from_function(t)
        if t.name in self._own or (self._toolsets and t.name in self):
            raise ConfigurationError(f"duplicate tool name {t.name!r}")
        self._own[t.name] = t
        self._seen = None  # with toolsets, `_tools` is a merged copy: merge again
        self._changed()
        return t

    def add_toolset(self, toolset: Toolset) -> None:
        """Add a toolset: its tools are read now, and again whenever they change."""
        self._toolsets.append(toolset)
        self._seen = None
        self._current()

    @property
    def dynamic(self) -> bool:
        """Whether the tools may change while a loop runs (the registry has a toolset)."""
        return bool(self._toolsets)

    @property
    def registered(self) -> list[Tool]:
        """The tools registered one by one, in order: all of them but the toolsets'."""
        return list(self._own.values())

    @property
    def toolsets(self) -> list[Toolset]:
        """The toolsets added, in order (their tools are re-read as they change)."""
        return list(self._toolsets)

    @property
    def revision(self) -> int:
        """Changes whenever the tools change: one registered, a toolset's re-listed."""
        if self._toolsets:
            self._current()
        return self._revision

    def _changed(self) -> None:
        self._revision += 1
        self._specs = None
        self._asking = None
        self._hosted = None

    def _current(self) -> None:
        """Re-read the toolsets if any changed since the last look."""
        seen = tuple(ts.revision for ts in self._toolsets)
        if seen == self._seen:
            return
        tools, owners = dict(self._own), dict.fromkeys(self._own, "a tool registered directly")
        for ts in self._toolsets:
            for t in ts.tools():
                if t.name in tools:
                    raise ConfigurationError(
                        f"tool name {t.name!r} is offered by {owners[t.name]} and by "
                        f"{ts.source}; give one of them a prefix"
                    )
                tools[t.name], owners[t.name] = t, ts.source
        self._tools, self._seen = tools, seen
        self._changed()

    @property
    def asking(self) -> frozenset[str]:
        """The names of the tools whose `requires_approval` is not plain False."""
        if self._toolsets:
            self._current()
        if self._asking is None:
            self._asking = frozenset(
                t.name for t in self._tools.values() if t.requires_approval is not False
            )
        return self._asking

    @property
    def hosted(self) -> frozenset[str]:
        """The names of the tools whose calls are sub-runs (`Tool.hosted`: agent tools and
        handoffs), which a loop's driver runs itself."""
        if self._toolsets:
            self._current()
        if self._hosted is None:
            self._hosted = frozenset(t.name for t in self._tools.values() if t.hosted)
        return self._hosted

    def specs(self) -> list[ToolSpec]:
        """What the model is told about every tool, in registration order."""
        if self._toolsets:
            self._current()
        if self._specs is None:
            self._specs = [t.spec() for t in self._tools.values()]
        return self._specs

    def get(self, name: str) -> Tool | None:
        if self._toolsets:
            self._current()
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        if self._toolsets:
            self._current()
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        if self._toolsets:
            self._current()
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        if self._toolsets:
            self._current()
        return iter(self._tools.values())

    def __len__(self) -> int:
        if self._toolsets:
            self._current()
        return len(self._tools)

    def call(
        self,
        name: str,
        args: dict[str, Any],
        *,
        key: str | None = None,
        cache: ToolCache | None = None,
    ) -> ToolOutcome:
        """Run one tool and wait for it. Never raises for the tool's own failure.

        An `async def` tool runs to completion here (on a fresh event loop; under a
        running loop, in a helper thread: from async code use `acall`). Exceptions that
        are not `Exception`s (KeyboardInterrupt, SystemExit) propagate, except a
        `CancelledError` out of an async tool, which nobody here cancelled: its failure.

        `key` is the call's idempotency key: what `idempotency_key()` returns while the
        tool runs (the one place it is set; a loop's drivers give it). `cache`: where the
        result may come from and is kept (default: the tool's own `cache`).
        """
        start = time.perf_counter()
        ready = self._prepare(name, args, start)
        if isinstance(ready, ToolOutcome):
            return ready
        t, kwargs = ready
        use = cache or t.cache  # on every tool call's path: the fewest steps when neither is
        if use and use is not _UNCACHED:  # set (a ToolCache is always true)
            return self._cached(use, name, args, key)
        token = None if key is None else _CALL_KEY.set(key)
        try:
            if t.is_async:
                value = t._runtime.run_coroutine(t.fn, kwargs, t.timeout)
            elif t.timeout is None and t.concurrent:  # the common case: a plain call, here
                value = t.fn(**kwargs)
            else:
                value = t._runtime.run(t.fn, kwargs, t.timeout)
        except Exception as exc:
            return self._failed(t, exc, start)
        except BaseException as exc:  # an interrupt ends the run; a stray cancel is the tool's
            if not own_cancel(exc):
                raise
            return self._failed(t, exc, start)
        finally:
            if token is not None:
                _CALL_KEY.reset(token)
        if type(value) is str and len(value) <= self.max_output_chars:
            return _outcome(value, False, time.perf_counter() - start)  # text that fits
        return self._finished(t, value, start)

    async def acall(
        self,
        name: str,
        args: dict[str, Any],
        *,
        key: str | None = None,
        cache: ToolCache | None = None,
    ) -> ToolOutcome:
        """Run one tool from async code: an `async def` tool is awaited on the running
        event loop, a sync one runs on a thread so the loop never blocks.

        The same rules (and `key`) as `call`; cancelling the caller cancels an async tool,
        and `CancelledError` propagates (a sync tool's thread runs on, counted as abandoned).
        A `CancelledError` the tool raises itself, the caller not being cancelled (it
        awaited something someone else cancelled), is the tool's failure, an error outcome
        (on Python 3.11 and later; 3.10 cannot tell the two apart and propagates it).
        """
        start = time.perf_counter()
        ready = self._prepare(name, args, start)
        if isinstance(ready, ToolOutcome):
            return ready
        t, kwargs = ready
        use = cache or t.cache
        if use and use is not _UNCACHED:
            hit = use.get(name, args)
            if hit is not None:
                return hit
            outcome = await self.acall(name, args, key=key, cache=_UNCACHED)
            use.put(name, args, outcome)
            return outcome
        token = None if key is None else _CALL_KEY.set(key)
        try:
            if t.is_async:
                value = await t._runtime.arun(t.fn, kwargs, t.timeout)
            elif t.async_fn is not None:
                value = await t._runtime.arun(t.async_fn, kwargs, t.timeout)
            else:
                value = await t._runtime.arun_in_thread(t.fn, kwargs, t.timeout)
        except Exception as exc:
            return self._failed(t, exc, start)
        except BaseException as exc:  # the caller's cancellation propagates; the tool's own
            if not own_cancel(exc):  # (it awaited something someone cancelled) is its failure
                raise
            return self._failed(t, exc, start)
        finally:
            if token is not None:
                _CALL_KEY.reset(token)
        return self._finished(t, value, start)

    def _cached(
        self, cache: ToolCache, name: str, args: dict[str, Any], key: str | None
    ) -> ToolOutcome:
        """A call answered from `cache`, or run and kept there (unless it failed)."""
        hit = cache.get(name, args)
        if hit is not None:
            return hit
        outcome = self.call(name, args, key=key, cache=_UNCACHED)
        cache.put(name, args, outcome)
        return outcome

    # -- shared by call and acall: everything but running the function ----------------

    def _prepare(
        self, name: str, args: dict[str, Any], start: float
    ) -> tuple[Tool, dict[str, Any]] | ToolOutcome:
        """The tool and its own copy of validated arguments, or the error outcome."""
        if self._toolsets:
            self._current()
        t = self._tools.get(name)
        if t is None:
            known = ", ".join(self._tools) or "(none)"
            return self._error(f"unknown tool {name!r}; available tools: {known}", start)
        if not isinstance(args, dict):
            return self._error(
                f"arguments for {name!r} must be a JSON object, got {type(args).__name__}", start
            )
        if INVALID_ARGUMENTS in args:
            return self._error(f"invalid arguments for {name!r}: {args[INVALID_ARGUMENTS]}", start)
        stuck = t._runtime.abandoned
        if stuck >= self.max_abandoned_threads:
            return self._error(
                f"{name!r} refused: {stuck} earlier calls timed out and are still running "
                f"(max_abandoned_threads={self.max_abandoned_threads}); the tool looks hung, "
                f"so it takes no new calls until they finish",
                start,
            )
        try:
            kwargs = t.validate(_copied(args))
        except pydantic.ValidationError as exc:
            return self._error(
                f"invalid arguments for {name!r}: {'; '.join(field_errors(exc))}", start
            )
        except Exception as exc:  # arguments that cannot be copied, a validator that raises
            return self._error(
                f"invalid arguments for {name!r}: {describe(exc, self.max_output_chars)}", start
            )
        return t, kwargs

    def _failed(self, t: Tool, exc: BaseException, start: float) -> ToolOutcome:
        if isinstance(exc, ModelRetry):  # a message to the model, not a failure to describe
            text = capped(str(exc.message), self.max_output_chars)
            return _outcome(text, True, time.perf_counter() - start, True)
        if isinstance(exc, TimedOut):
            waited = " waiting for its earlier call to finish" if exc.waiting else ""
            return self._error(f"{t.name!r} timed out after {t.timeout} s{waited}", start)
        if not isinstance(exc, Exception):  # a CancelledError of its own (`own_cancel`)
            why = f"{describe(exc, self.max_output_chars)} (something it awaited was cancelled)"
            return self._error(f"{t.name!r} failed: {why}", start)
        return self._error(f"{t.name!r} failed: {describe(exc, self.max_output_chars)}", start)

    def _finished(self, t: Tool, value: Any, start: float) -> ToolOutcome:
        if type(value) is ToolOutcome:  # the tool says itself whether it failed
            if len(value.content) > self.max_output_chars:
                return self._error(value.content, start)
            return _outcome(value.content, value.is_error, time.perf_counter() - start)
        try:
            text = to_text(value)
        except Exception as exc:
            kind = type(value).__name__
            why = describe(exc, self.max_output_chars)
            return self._error(
                f"{t.name!r} returned a {kind} that cannot be made text: {why}", start
            )
        if len(text) > self.max_output_chars:
            return self._error(text, start)
        return _outcome(text, False, time.perf_counter() - start)

    def _error(self, text: str, start: float) -> ToolOutcome:
        """An error outcome; its text is capped like any output."""
        return _outcome(capped(text, self.max_output_chars), True, time.perf_counter() - start)
