"""Check, before submitting, that work can travel to a process or cluster executor.

A thread pool shares memory, so nothing is checked there. A process pool pickles with
the standard library; Dask's executor falls back to cloudpickle, which also carries
lambdas and local functions by value. Failing here, with the culprit named, beats a
pickling traceback from deep inside the executor (or a lost future, or a tool that
arrives as nothing and answers "unknown tool").

Rule: it knows tools (to name the one that fails) and nothing above them: no driver, no
loop.
"""

from __future__ import annotations

import functools
import importlib
import io
import sys
import types
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from agentloops.errors import ConfigurationError

Dumps = Callable[[Any], bytes]

_HINT = (
    "Work sent to a process or cluster executor must be picklable: define tools and the "
    "function passed to run_many at module level (a `@tool` on a module-level function "
    "pickles by name), and keep locks, open files and clients out of them (build those "
    "inside the function instead)."
)


def pickler_for(executor: Executor | None) -> Dumps | None:
    """The function that will serialise work for `executor`, or `None` when nothing is.

    Thread pools (and the default `None`) share memory. A `ProcessPoolExecutor` uses
    `pickle`. Dask's `distributed` executor uses cloudpickle; the check also refuses a
    tool that would travel by name from the script being run (`__main__`), which a
    worker cannot import back. Any other executor is not checked: its own error will
    surface from the future.
    """
    if executor is None or isinstance(executor, ThreadPoolExecutor):
        return None
    process = sys.modules.get("concurrent.futures.process")  # loaded if one was ever made
    if process is not None and isinstance(executor, process.ProcessPoolExecutor):
        return _std_dumps
    if type(executor).__module__.split(".")[0] == "distributed":
        return _cluster_dumps
    return None


_MAIN_MODULES = ("__main__", "__mp_main__")


def _cluster_dumps(obj: Any) -> bytes:
    """cloudpickle, refusing what a cluster worker could not import back by name."""
    buffer = io.BytesIO()
    _cluster_pickler()(buffer).dump(obj)
    return buffer.getvalue()


@functools.lru_cache(maxsize=1)
def _cluster_pickler() -> type:
    import pickle

    cloudpickle = importlib.import_module("cloudpickle")  # a dependency of distributed
    from agentloops.tools import Tool

    class ClusterPickler(cloudpickle.Pickler):  # type: ignore[misc,name-defined]
        def reducer_override(self, obj: Any) -> Any:
            by_name = obj._by_name() if isinstance(obj, Tool) else None
            if by_name is not None and by_name[0] in _MAIN_MODULES:
                raise pickle.PicklingError(
                    f"tool {obj.name!r} is defined in the script being run (module "
                    f"{by_name[0]}), so it pickles by name and the workers "
                    "cannot import it back (a cluster worker's __main__ is not your "
                    "script); define it in a module the workers can import, such as a "
                    "tools.py next to the script"
                )
            return super().reducer_override(obj)

    return ClusterPickler


def ensure_picklable(obj: Any, what: str, *, executor: Executor | None = None) -> None:
    """Raise `ConfigurationError` naming `what` (and the culprit inside it) if `obj`
    cannot be sent to `executor`.

    With `executor=None` the check is the strict one (the standard library's `pickle`);
    with a thread pool nothing is checked.

    Args:
        obj: a tool, a function, a run input: whatever will be submitted.
        what: how to name it in the error, e.g. `"tool 'search'"` or `"input 3"`.
        executor: where it will run.

    Raises:
        ConfigurationError: `obj` cannot be pickled; the message names the innermost
            tool or value that fails (a tool inside a `functools.partial`, a registry,
            a list...) and the pickling error.
    """
    dumps = _std_dumps if executor is None else pickler_for(executor)
    if dumps is None:
        return
    problem = _problem(dumps, obj)
    if problem is None:
        return
    path, detail = _culprit(dumps, obj, problem, depth=6)
    at = f" (at {' > '.join(path)})" if path else ""
    kind = type(executor).__name__ if executor is not None else "a process or cluster executor"
    raise ConfigurationError(f"{what} cannot be pickled for {kind}{at}: {detail}. {_HINT}")


def _std_dumps(obj: Any) -> bytes:
    import pickle  # only when work leaves the process

    return pickle.dumps(obj)


def _problem(dumps: Dumps, obj: Any) -> str | None:
    try:
        dumps(obj)
    except Exception as exc:  # pickling raises TypeError, AttributeError, PicklingError...
        return f"{type(exc).__name__}: {exc}"
    return None


def _culprit(dumps: Dumps, obj: Any, problem: str, *, depth: int) -> tuple[list[str], str]:
    """The path to the innermost part of `obj` that fails, and its pickling error."""
    from agentloops.tools import Tool

    if depth > 0:
        for name, part in _parts(obj):
            inner = _problem(dumps, part)
            if inner is not None:
                path, detail = _culprit(dumps, part, inner, depth=depth - 1)
                if isinstance(part, Tool):
                    name = f"{name}: tool {part.name!r}"
                return [name, *path], detail
    return [], problem


def _parts(obj: Any) -> list[tuple[str, Any]]:
    """The named pieces a container-like object would pickle."""
    from agentloops.tools import Tool, ToolRegistry

    if isinstance(obj, types.ModuleType | type):
        return []
    if isinstance(obj, types.FunctionType):
        cells = zip(obj.__code__.co_freevars, obj.__closure__ or (), strict=False)
        return [(f"closure variable {name!r}", cell.cell_contents) for name, cell in cells]
    if isinstance(obj, types.MethodType):
        return [("its object", obj.__self__), ("its function", obj.__func__)]
    if isinstance(obj, Tool):
        return [("its function", obj.fn)]
    if isinstance(obj, ToolRegistry):
        return [(f"item {i}", t) for i, t in enumerate(obj)]
    if isinstance(obj, functools.partial):
        parts = [("the wrapped function", obj.func)]
        parts += [(f"argument {i}", a) for i, a in enumerate(obj.args)]
        return parts + [(f"argument {k!r}", v) for k, v in obj.keywords.items()]
    if isinstance(obj, list | tuple | set | frozenset):
        return [(f"item {i}", v) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return [(f"key {k!r}", v) for k, v in obj.items()]
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        return [(f"attribute {k!r}", v) for k, v in state.items()]
    return []
