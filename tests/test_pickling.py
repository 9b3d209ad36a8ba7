"""ensure_picklable: which executors check, and how the culprit is named."""

from __future__ import annotations

import functools
import pickle
import threading
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pytest
from _dask_helpers import locked_bump  # the one lock-holding tool both test files use

from agentloops import ConfigurationError, Tool, ToolRegistry, tool
from agentloops._pickling import ensure_picklable, pickler_for


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def run(task: str, tools: list[Tool]) -> str:
    return task


def _locked_closure() -> Any:
    lock = threading.Lock()

    def guarded() -> None:
        with lock:
            pass

    return guarded


bump = locked_bump  # a tool whose state holds a lock, which no process can receive


@pytest.mark.parametrize(
    ("obj", "where"),
    [
        (bump, "(at its function > its object > attribute 'lock')"),
        (ToolRegistry([shout, bump]), "(at item 1: tool 'bump' > its function > its object"),
        (functools.partial(run, tools=[shout, bump]), "(at argument 'tools' > item 1: tool 'bump'"),
        ({"hooks": [threading.Lock()]}, "(at key 'hooks' > item 0)"),
        (_locked_closure(), "(at closure variable 'lock')"),
        (lambda: 1, "PicklingError"),
    ],
)
def test_the_error_names_the_culprit_inside_what_is_sent(obj, where):
    with pytest.raises(ConfigurationError) as info:
        ensure_picklable(obj, "the work")
    message = str(info.value)
    assert message.startswith("the work cannot be pickled for a process or cluster executor")
    assert where in message
    assert "module level" in message  # says what to do about it


def test_a_module_level_tool_pickles_by_name():
    ensure_picklable(shout, "tool 'shout'")
    assert pickle.loads(pickle.dumps(shout)) is shout


class Inline(Executor):
    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def test_which_executors_are_checked():
    with ThreadPoolExecutor(1) as threads:
        assert pickler_for(threads) is None
        ensure_picklable(lambda: 1, "a lambda", executor=threads)  # shared memory: fine
    assert pickler_for(None) is None
    assert pickler_for(Inline()) is None  # unknown: its own error will tell
    processes = ProcessPoolExecutor(1)
    try:
        assert pickler_for(processes) is not None
        with pytest.raises(ConfigurationError, match="for ProcessPoolExecutor"):
            ensure_picklable(lambda: 1, "a lambda", executor=processes)
    finally:
        processes.shutdown()
