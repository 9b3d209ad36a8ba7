"""run_many on thread pools: order, isolation, progress, and resuming from a JSONL file."""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pydantic
import pytest

from agentloops import BatchItem, ConfigurationError, ReActLoop, ReActResult, run_many, tool
from agentloops.testing import ScriptedModel, use_tools


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def agent_run(task: int) -> ReActResult:
    model = ScriptedModel([use_tools(("double", {"n": task})), f"The answer is {2 * task}."])
    return ReActLoop(model, [double]).run(f"Double {task}", run_id=f"run-{task}")


def test_results_keep_input_order_whatever_order_runs_finish_in():
    n = 6
    done = [threading.Event() for _ in range(n)]
    finish_order: list[int] = []

    def work(i: int) -> int:
        if i + 1 < n:  # each run waits for the next one: they finish in reverse order
            assert done[i + 1].wait(5)
        finish_order.append(i)
        done[i].set()
        return i * 10

    seen: list[BatchItem] = []
    items = run_many(work, range(n), max_workers=n, on_result=seen.append)
    assert finish_order == list(reversed(range(n)))
    assert [(it.input, it.output, it.error) for it in items] == [
        (i, i * 10, None) for i in range(n)
    ]
    assert sorted(it.input for it in seen) == list(range(n))
    assert all(it.ok and it.seconds >= 0 for it in items)


def test_agent_runs_in_a_batch_and_one_failure_loses_nothing():
    def run(task: int) -> ReActResult:
        if task == 3:
            raise RuntimeError("model unreachable")
        return agent_run(task)

    items = run_many(run, range(8), max_workers=4)
    assert [it.output.answer for it in items if it.ok] == [
        f"The answer is {2 * t}." for t in (0, 1, 2, 4, 5, 6, 7)
    ]
    assert items[3] == BatchItem(
        input=3, error="RuntimeError: model unreachable", seconds=items[3].seconds
    )
    assert not items[3].ok


def test_a_given_executor_is_used_and_left_open():
    with ThreadPoolExecutor(2, thread_name_prefix="mine") as pool:
        items = run_many(lambda _: threading.current_thread().name, [1, 2], executor=pool)
        assert all(it.output.startswith("mine") for it in items)
        assert pool.submit(int, "7").result() == 7  # still open


class LosingExecutor(Executor):
    """An executor whose runs are lost in transit (a dead worker, an unpicklable result)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(OSError("worker died"))
        return future


def test_a_run_the_executor_loses_is_an_item_with_the_error():
    items = run_many(str, [1, 2], executor=LosingExecutor())
    assert [it.error for it in items] == ["OSError: worker died"] * 2


def test_jsonl_records_every_item_and_a_second_run_skips_the_successes(tmp_path):
    path = tmp_path / "batch.jsonl"
    calls: list[int] = []
    failed_once: list[int] = []

    def flaky(task: int) -> dict[str, int]:
        calls.append(task)
        if task == 2 and not failed_once:
            failed_once.append(task)
            raise TimeoutError("rate limited")
        return {"task": task, "square": task * task}

    first = run_many(flaky, [1, 2, 3], jsonl=path)
    assert [it.error for it in first] == [None, "TimeoutError: rate limited", None]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(r["key"] for r in records) == ["1", "2", "3"]
    assert {r["key"]: r["error"] for r in records}["2"] == "TimeoutError: rate limited"

    calls.clear()
    second = run_many(flaky, [1, 2, 3, 4], jsonl=path)
    assert sorted(calls) == [2, 4]  # 1 and 3 are done; the failed 2 runs again
    assert [it.output for it in second] == [{"task": t, "square": t * t} for t in (1, 2, 3, 4)]
    assert all(it.ok for it in second)

    calls.clear()
    assert [it.output["square"] for it in run_many(flaky, [4, 3], jsonl=path)] == [16, 9]
    assert calls == []


def test_an_interrupted_batch_resumes_where_it_stopped(tmp_path):
    path = tmp_path / "batch.jsonl"
    ran: list[int] = []

    def work(task: int) -> int:
        ran.append(task)
        return task

    def stop_after_two(item: BatchItem) -> None:
        if len(ran) >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_many(work, range(6), max_workers=1, jsonl=path, on_result=stop_after_two)
    recorded = {json.loads(line)["input"] for line in path.read_text().splitlines()}
    assert 1 <= len(recorded) < 6
    with path.open("a") as f:
        f.write('{"key": "5", "input": 5, "outp')  # the line a kill cut short
    ran.clear()
    with pytest.warns(RuntimeWarning, match=r"skipped 1 unreadable line\(s\) \(\d\)"):
        items = run_many(work, range(6), jsonl=path)
    assert [it.output for it in items] == list(range(6))
    assert sorted(ran) == sorted(set(range(6)) - recorded)
    records = [json.loads(line) for line in path.read_text().splitlines()]  # all whole
    assert sorted(r["input"] for r in records) == list(range(6))


class Point(pydantic.BaseModel):
    x: int


@dataclasses.dataclass
class Pair:
    a: int
    b: int


@pytest.mark.parametrize(
    ("output", "stored"),
    [
        (Point(x=1), {"x": 1}),
        (Pair(1, 2), {"a": 1, "b": 2}),
        ({1, 2}, "{1, 2}"),
        ("text", "text"),
    ],
)
def test_outputs_are_stored_as_json(tmp_path, output, stored):
    path = tmp_path / "out.jsonl"
    run_many(lambda _: output, ["x"], jsonl=path)
    assert json.loads(path.read_text())["output"] == stored


def test_an_agent_result_is_stored_by_its_state_and_can_be_rebuilt(tmp_path):
    path = tmp_path / "runs.jsonl"
    original = run_many(agent_run, [5], jsonl=path)[0].output
    resumed = run_many(agent_run, [5], jsonl=path)[0].output
    assert ReActResult.from_state(resumed) == original


def test_inputs_need_a_json_key_for_jsonl_unless_a_key_function_is_given(tmp_path):
    path = tmp_path / "k.jsonl"
    with pytest.raises(ConfigurationError, match=r"input 1 .* pass key="):
        run_many(str, ["a", object()], jsonl=path)
    by_json = {"key": lambda p: p.model_dump_json()}
    assert run_many(lambda p: p.x, [Point(x=3)], jsonl=path, **by_json)[0].output == 3
    assert json.loads(path.read_text())["key"] == '{"x":3}'
    resumed = run_many(lambda p: p.x, [Point(x=3)], jsonl=path, **by_json)[0]
    assert resumed.input == Point(x=3)  # the caller's input, not its JSON form


def test_progress_is_drawn_on_stderr_when_asked(capsys):
    run_many(lambda x: 1 // x, [1, 0, 2], progress=True)
    err = capsys.readouterr().err
    assert err.startswith("\r0/3 done, 0 failed")
    assert "\r3/3 done, 1 failed" in err and err.endswith("\n")


def test_no_progress_when_stderr_is_not_a_terminal(capsys):
    run_many(str, [1, 2])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("fn", "inputs", "message"),
    [
        (lambda x: x, [1], "the function passed to run_many cannot be pickled"),
        (str, [threading.Lock()], r"input 0 .* cannot be pickled"),
    ],
)
def test_work_a_process_pool_cannot_pickle_is_refused_before_anything_runs(fn, inputs, message):
    pool = ProcessPoolExecutor(1)  # no worker starts until something is submitted
    try:
        with pytest.raises(ConfigurationError, match=message):
            run_many(fn, inputs, executor=pool)
    finally:
        pool.shutdown()


def test_max_workers_must_be_positive():
    with pytest.raises(ConfigurationError, match="max_workers must be >= 1, got 0"):
        run_many(str, [1], max_workers=0)


def test_an_interrupt_cancels_the_queued_work_of_a_given_executor():
    ran: list[int] = []
    released = threading.Event()

    def work(task: int) -> int:
        if task:  # every run after the first waits until the interrupt has happened
            released.wait(5)
        ran.append(task)
        return task

    def stop(item: BatchItem) -> None:
        raise KeyboardInterrupt

    with ThreadPoolExecutor(1) as pool:  # the caller's pool: run_many does not shut it down
        with pytest.raises(KeyboardInterrupt):
            run_many(work, range(5), executor=pool, on_result=stop, progress=False)
        released.set()
    assert ran[0] == 0 and not {2, 3, 4} & set(ran)  # queued work was cancelled, not run


def test_inputs_already_done_need_not_travel_to_a_process_pool(tmp_path):
    path = tmp_path / "batch.jsonl"
    locked = threading.Lock()  # cannot be pickled, but it finished in an earlier run

    def name(value: Any) -> str:
        return "locked" if value is locked else str(value)

    run_many(lambda v: "done", [locked], jsonl=path, key=name)
    pool = ProcessPoolExecutor(1)
    try:
        items = run_many(str, [locked], executor=pool, jsonl=path, key=name)
    finally:
        pool.shutdown()
    assert [it.output for it in items] == ["done"]
