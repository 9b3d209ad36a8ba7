"""JSONL files (run_many results, JSONLSink): whole lines or nothing, whatever the data."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    JSONLSink,
    PlanMade,
    RecordWriteError,
    ReWOOPlan,
    ToolCallStarted,
    run_many,
)

LONE = "half a pair: \ud83d"  # a lone surrogate: str holds it, UTF-8 cannot
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


def lines_of(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "the file ends on a partial line"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")


class BadState:
    def to_state(self) -> dict[str, Any]:
        raise ValueError("cannot")

    def __str__(self) -> str:
        return "BadState()"


# -- run_many ----------------------------------------------------------------------


def test_a_lone_surrogate_in_an_output_is_stored_and_skipped_on_the_next_run(tmp_path):
    path = tmp_path / "batch.jsonl"
    ran: list[int] = []

    def work(n: int) -> str:
        ran.append(n)
        return LONE if n == 1 else f"ok {n}"

    first = run_many(work, [0, 1, 2], jsonl=path, max_workers=1)
    assert [it.output for it in first] == ["ok 0", LONE, "ok 2"]
    assert sorted(r["output"] for r in lines_of(path)) == sorted(["ok 0", LONE, "ok 2"])
    ran.clear()
    again = run_many(work, [0, 1, 2], jsonl=path)
    assert ran == [] and [it.output for it in again] == ["ok 0", LONE, "ok 2"]


def test_a_lone_surrogate_in_an_input_still_recognises_it(tmp_path):
    path = tmp_path / "batch.jsonl"
    run_many(len, [LONE, "b"], jsonl=path)
    calls: list[str] = []
    items = run_many(lambda s: calls.append(s) or 0, [LONE, "b"], jsonl=path)
    assert calls == [] and [it.output for it in items] == [len(LONE), 1]


@pytest.mark.parametrize(
    ("output", "stored"),
    [
        ({"value": Unprintable()}, {"value": "<a Unprintable that cannot be printed>"}),
        ({(1, 2): "tuple key"}, "{(1, 2): 'tuple key'}"),
        (BadState(), "BadState()"),
    ],
    ids=["unprintable-value", "tuple-key", "to_state-raises"],
)
def test_an_output_json_cannot_hold_is_stored_as_text(tmp_path, output, stored):
    path = tmp_path / "batch.jsonl"
    items = run_many(lambda _: output, ["x"], jsonl=path)
    assert items[0].ok and lines_of(path)[0]["output"] == stored


def test_a_torn_last_line_is_reported_skipped_and_cut_before_appending(tmp_path):
    path = tmp_path / "batch.jsonl"
    run_many(str, [1, 2], jsonl=path)
    with path.open("ab") as f:
        f.write('{"key": "3", "input": 3, "output": "caf\u00e9'.encode()[:-1])  # cut mid-character
    with pytest.warns(RuntimeWarning, match=r"skipped 1 unreadable line\(s\) \(3\)"):
        items = run_many(str, [1, 2, 3], jsonl=path)
    assert [it.output for it in items] == ["1", "2", "3"]
    assert [r["input"] for r in lines_of(path)] == [1, 2, 3]  # the torn line is gone


def test_unreadable_lines_in_the_middle_are_skipped_and_named(tmp_path):
    path = tmp_path / "batch.jsonl"
    good = json.dumps({"key": "1", "input": 1, "output": "one", "error": None, "seconds": 0})
    path.write_bytes(b"garbage\n\xff\xfe\n" + good.encode() + b"\n[1, 2]\n")
    with pytest.warns(RuntimeWarning, match=r"skipped 3 unreadable line\(s\) \(1, 2, 4\)"):
        items = run_many(lambda n: "ran", [1, 2], jsonl=path)
    assert [it.output for it in items] == ["one", "ran"]


@needs_dev_full
def test_a_full_disk_raises_a_typed_error_with_every_finished_item_in_memory():
    ran: list[int] = []
    started = threading.Event()

    def work(n: int) -> int:
        if n == 0:
            started.wait(5)
        else:  # running when the write of item 0 fails: its work is not thrown away
            started.set()
            time.sleep(0.3)
        ran.append(n)
        return n * 10

    with pytest.raises(RecordWriteError) as info:
        run_many(work, range(5), jsonl="/dev/full", max_workers=2)
    error = info.value
    assert isinstance(error, OSError) and error.errno == errno.ENOSPC
    assert str(error).startswith("/dev/full: could not write a record:")
    finished = [(it.input, it.output) for it in error.result]
    assert finished[:2] == [(0, 0), (1, 10)] and finished in (
        [(0, 0), (1, 10)],
        [*finished[:2], (2, 20)],
    )
    assert sorted(ran) == [n for n, _ in finished]  # every run that ran is in the result
    assert not {3, 4} & set(ran)  # queued runs were cancelled


def test_a_write_cut_short_by_the_file_size_limit_leaves_only_whole_lines(tmp_path):
    # A real partial write: RLIMIT_FSIZE lets write() put down only part of a line.
    path = tmp_path / "events.jsonl"
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        from agentloops import JSONLSink, PlanMade, RecordWriteError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10_000, 10_000))
        sink = JSONLSink({str(path)!r})
        written = 0
        try:
            while True:
                sink(PlanMade(loop="x", run_id="r", plan={{"n": written, "pad": "p" * 700}}))
                written += 1
        except RecordWriteError as exc:
            print(written, exc.errno)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    written, code = out.stdout.split()
    records = lines_of(path)
    assert len(records) == int(written) > 0
    assert [r["plan"]["n"] for r in records] == list(range(int(written)))
    assert int(code) == errno.EFBIG
    assert path.stat().st_size < 10_000  # the cut line was written in part, then removed


# -- JSONLSink ---------------------------------------------------------------------


@needs_dev_full
def test_a_sink_on_a_full_disk_raises_a_typed_error():
    sink = JSONLSink("/dev/full")
    with pytest.raises(RecordWriteError) as info:
        sink(PlanMade(loop="x", run_id="r", plan={"a": 1}))
    assert info.value.errno == errno.ENOSPC and info.value.path == Path("/dev/full")
    assert info.value.result is None  # a loop attaches its partial result on the way out
    sink.close()


def test_a_sink_writes_what_json_cannot_hold(tmp_path):
    path = tmp_path / "events.jsonl"
    with JSONLSink(path) as sink:
        sink(ToolCallStarted(loop="react", run_id="r", call_id="c", name="t", args={"s": LONE}))
        sink(PlanMade(loop="x", run_id="r", plan={"odd": Unprintable(), "k": {(1,): 2}}))
        sink(PlanMade(loop="x", run_id="r", plan=ReWOOPlan(steps=[])))
    first, second, third = lines_of(path)
    assert first["args"] == {"s": LONE}
    assert second["plan"].startswith(f"{{'odd': <{__name__}.Unprintable object at")
    assert second["plan"].endswith(", 'k': {(1,): 2}}")
    assert third["plan"] == {"steps": []}


def test_a_sink_cuts_off_a_torn_last_line_when_it_opens(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event": "RunStarted"}\n{"event": "RunFin')
    with pytest.warns(RuntimeWarning, match=r"cut off a torn last line \(17 bytes"):
        sink = JSONLSink(path)
    sink(PlanMade(loop="x", run_id="r", plan={}))
    sink.close()
    assert [r["event"] for r in lines_of(path)] == ["RunStarted", "PlanMade"]
