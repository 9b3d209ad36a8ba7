"""ensure_picklable: which executors check, and how the culprit is named."""

from __future__ import annotations

import functools
import pickle
import sys
import threading
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pytest
from _dask_helpers import (  # shared with the Dask tests
    locked_bump,
    script_lookup,
    script_made_tool,
)

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


# -- tools defined in the script being run (module __main__) -------------------------


@pytest.fixture
def script_tool(monkeypatch: pytest.MonkeyPatch) -> Tool:
    return script_made_tool(monkeypatch)


class FakeClusterExecutor(Executor):
    """Stands in for distributed's ClientExecutor: only its module name is looked at."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


FakeClusterExecutor.__module__ = "distributed.cfexecutor"


def test_a_tool_from_the_script_being_run_is_refused_for_a_cluster(script_tool):
    assert pickle.loads(pickle.dumps(script_tool)) is script_tool  # by name, here
    with pytest.raises(ConfigurationError) as info:
        ensure_picklable(ToolRegistry([shout, script_tool]), "tool 'lookup'", executor=CLUSTER)
    message = str(info.value)
    assert message.startswith(
        "tool 'lookup' cannot be pickled for FakeClusterExecutor (at item 1: tool 'lookup'): "
        "PicklingError: tool 'lookup' is defined in the script being run (module __main__)"
    )
    assert "define it in a module the workers can import" in message


def test_module_tools_and_tools_travelling_by_value_pass_the_cluster_check():
    ensure_picklable(ToolRegistry([shout]), "tools", executor=CLUSTER)
    local = Tool.from_function(script_lookup)  # not found by name: travels by value
    ensure_picklable(functools.partial(run, tools=[local]), "work", executor=CLUSTER)


def test_a_process_pool_may_take_a_script_tool(script_tool):
    # The children of a process pool import the script again: its top-level tools exist.
    processes = ProcessPoolExecutor(1)
    try:
        ensure_picklable(script_tool, "tool 'lookup'", executor=processes)
    finally:
        processes.shutdown()


def test_a_worker_that_cannot_find_a_tool_says_which_and_where(script_tool, monkeypatch):
    sent = pickle.dumps(script_tool)
    monkeypatch.delattr(sys.modules["__main__"], "agentloops_test_lookup")  # the worker's view
    with pytest.raises(
        AttributeError,
        match=r"tool 'agentloops_test_lookup' is not defined "
        r"in module '__main__' in this process",
    ):
        pickle.loads(sent)


CLUSTER = FakeClusterExecutor()
