"""Many runs at once: `run_many` maps a function over inputs on any executor.

Typically one agent run per task, on the default thread pool, a process pool, or a
Dask cluster (`distributed.Client(...).get_executor()`). Results keep input order, a
failed run becomes an item with its error and never loses the others, and a JSONL
file lets an interrupted batch skip what already finished when it runs again. With a
`store`, each item is a durable run (`batch.durable`): an attempt that dies mid-item
leaves it to the next attempt, which resumes it from its journal.

Rule: a kit; it knows the helpers, errors and run stores, and no loop (it maps any
function).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agentloops._jsonl import JSONLFile, WriteFailed, as_text, read_records
from agentloops._pickling import ensure_picklable, pickler_for
from agentloops.batch.durable import DurableItem, WithItem, check_store, run_id_for
from agentloops.errors import ConfigurationError, RecordWriteError
from agentloops.journal.records import RunStore

__all__ = ["BatchItem", "DurableItem", "run_many"]


@dataclass(frozen=True, kw_only=True)
class BatchItem:
    """One input and what became of it."""

    input: Any
    output: Any = None
    """What `fn` returned (for an item read back from a JSONL file: its JSON form)."""
    error: str | None = None
    """`"TypeName: message"` when `fn` raised or the executor lost the run; else `None`."""
    seconds: float = 0.0
    """How long `fn` ran, measured where it ran."""

    @property
    def ok(self) -> bool:
        return self.error is None


def run_many(
    fn: Callable[..., Any],
    inputs: Iterable[Any],
    *,
    executor: Executor | None = None,
    max_workers: int = 8,
    on_result: Callable[[BatchItem], None] | None = None,
    jsonl: str | Path | None = None,
    key: Callable[[Any], str] | None = None,
    progress: bool | None = None,
    store: RunStore | None = None,
    lease_wait: float = 120.0,
) -> list[BatchItem]:
    """Run `fn(input)` for every input; return one `BatchItem` per input, in input order.

    Args:
        fn: the work for one input, e.g. a function that builds a loop and runs it.
            For a process pool or a Dask cluster it must be picklable (module level).
        inputs: the inputs; for a process or cluster executor each must be picklable.
        executor: any `concurrent.futures.Executor`; it is not shut down. `None` uses
            a thread pool of `max_workers`, closed on return.
        max_workers: the size of the default thread pool.
        on_result: called in the caller's thread with each item as it finishes.
        jsonl: a file that gets one JSON line per finished item (`input`, `output`,
            `error`, `seconds`). Running again with the same file skips the inputs it
            holds a success for (failed ones run again) and returns their recorded
            items. Outputs are stored as JSON: `to_state()` if they have it (e.g.
            `ReActResult`), a pydantic model's dump, a dataclass as a dict, else the
            value itself (`str()` for what JSON cannot hold). Lines are written whole
            or not at all; unreadable lines (a torn last one) are skipped with a
            `RuntimeWarning`, and a torn last line is cut off before appending.
        key: how an input is recognised in the JSONL file, and (with `store`) its run
            id. Default: its canonical JSON (sorted keys), so inputs must then be
            JSON-serialisable (with `store`: `"item-"` and a digest of it).
        progress: draw a one-line progress bar on stderr. `None`: only when stderr is
            a terminal.
        store: make each item a durable run journaled in this store, its id from
            `key`: `fn` is then called as `fn(input, item)` with a `DurableItem`, and
            builds its loop over `item.store` and returns `item.drive(loop, task)`. An
            attempt killed mid-item (a Dask worker, this process) leaves the run to the
            next attempt (Dask's own retry, or the next `run_many` call), which resumes
            it from its journal: no recorded model or tool call runs again, and a
            finished item's result comes back from the journal. For a process or
            cluster executor, a store the workers reach (`SQLiteStore` on one machine,
            `PostgresStore`).
        lease_wait: with `store`, seconds an item waits for a lease a dead attempt
            still holds (it lapses after the loop's `lease_ttl`).

    Raises:
        ConfigurationError: `max_workers < 1`; `fn` or an input cannot be pickled for
            `executor` (naming the culprit); with `jsonl`, an input has no JSON key;
            with `store`, two inputs with one run id, or a `MemoryStore` for workers in
            other processes.
        RecordWriteError: the `jsonl` file could not be written (a full disk): queued
            runs are cancelled, the ones already running are waited for, and its
            `.result` holds every item that finished, in input order (those the file
            could not take included).

    Examples:
        >>> items = run_many(lambda x: 10 // x, [5, 0, 2], progress=False)
        >>> [(i.output, i.error) for i in items]
        [(2, None), (None, 'ZeroDivisionError: integer division or modulo by zero'), (5, None)]
    """
    if max_workers < 1:
        raise ConfigurationError(f"max_workers must be >= 1, got {max_workers}")
    todo = list(inputs)
    items: list[BatchItem | None] = [None] * len(todo)
    keys: list[str] = []
    if jsonl is not None:
        keys = [_key(key, value, i) for i, value in enumerate(todo)]
        done = _load(Path(jsonl))
        for i, k in enumerate(keys):
            if k in done:  # recorded by an earlier call: keep the caller's own input object
                items[i] = dataclasses.replace(done[k], input=todo[i])
    work, args = fn, todo
    if store is not None:
        work, args = _durable(fn, todo, key, store, lease_wait, executor)
    if pickler_for(executor) is not None:  # only what will travel: not the inputs already done
        ensure_picklable(fn, "the function passed to run_many", executor=executor)
        if store is not None:
            ensure_picklable(store, "the store passed to run_many", executor=executor)
        for i, value in enumerate(todo):
            if items[i] is None:
                ensure_picklable(value, f"input {i} ({value!r:.60})", executor=executor)
    futures: dict[Future[tuple[Any, str | None, float]], int] = {}
    with contextlib.ExitStack() as stack:
        log = JSONLFile(jsonl, report=False) if jsonl is not None else None  # _load reported
        if log is not None:
            stack.callback(log.close)
        pool = executor
        if pool is None:
            pool = ThreadPoolExecutor(max_workers, thread_name_prefix="agentloops-batch")
            stack.callback(pool.shutdown, wait=False, cancel_futures=True)
        bar = _Progress(len(todo), len(todo) - items.count(None), progress)
        stack.callback(bar.close)
        try:
            for i, arg in enumerate(args):
                if items[i] is None:
                    futures[pool.submit(_timed, work, arg)] = i
            for future in as_completed(futures):
                i = futures[future]
                items[i] = item = _item(todo[i], future)
                if log is not None:
                    try:
                        log.append(_record(keys[i], item))
                    except WriteFailed as exc:
                        finished = _finish_running(futures, items, todo)
                        raise RecordWriteError(
                            str(exc), path=log.path, result=finished, errno=exc.errno
                        ) from exc.__cause__
                bar.update(item)
                if on_result is not None:
                    on_result(item)
        except BaseException:
            for future in futures:  # interrupted: stop queued work (the JSONL file has the rest)
                future.cancel()
            raise
    return [i for i in items if i is not None]


def _durable(
    fn: Callable[[Any, DurableItem], Any],
    todo: list[Any],
    key: Callable[[Any], str] | None,
    store: RunStore,
    lease_wait: float,
    executor: Executor | None,
) -> tuple[Callable[[Any], Any], list[Any]]:
    """`fn(input, item)` as work over `(run id, input)` pairs, one durable run each."""
    check_store(store, None if pickler_for(executor) is None else type(executor).__name__)
    run_ids = [run_id_for(key, value, i) for i, value in enumerate(todo)]
    seen: dict[str, int] = {}
    for i, run_id in enumerate(run_ids):
        if run_id in seen:
            raise ConfigurationError(
                f"inputs {seen[run_id]} and {i} have the same run id {run_id!r}: with store=, "
                "each input is one durable run; give key=... that tells them apart"
            )
        seen[run_id] = i
    return WithItem(fn, store, lease_wait), list(zip(run_ids, todo, strict=True))


def _finish_running(
    futures: dict[Future[tuple[Any, str | None, float]], int],
    items: list[BatchItem | None],
    todo: list[Any],
) -> list[BatchItem]:
    """After a failed write: cancel what has not started, wait for what has (its work is
    done or under way, and cannot be taken back), and give every finished item."""
    running = [f for f in futures if not f.cancel()]
    for future in running:
        i = futures[future]
        if items[i] is None:
            items[i] = _item(todo[i], future)  # waits for it
    return [it for it in items if it is not None]


def _timed(fn: Callable[[Any], Any], value: Any) -> tuple[Any, str | None, float]:
    """Runs where the work runs: the error becomes a string there, so it always pickles."""
    start = time.perf_counter()
    try:
        return fn(value), None, time.perf_counter() - start
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - start


def _item(value: Any, future: Future[tuple[Any, str | None, float]]) -> BatchItem:
    try:
        output, error, seconds = future.result()
    except Exception as exc:  # the executor lost the run: a dead worker, an unpicklable output
        return BatchItem(input=value, error=f"{type(exc).__name__}: {exc}")
    return BatchItem(input=value, output=output, error=error, seconds=seconds)


def _key(key: Callable[[Any], str] | None, value: Any, index: int) -> str:
    if key is not None:
        return key(value)
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"input {index} ({value!r:.60}) has no JSON form to recognise it by in the "
            f"jsonl file ({exc}); pass key=... to name inputs"
        ) from exc


def _load(path: Path) -> dict[str, BatchItem]:
    """Successful items recorded in `path`, by key; the last line for a key wins."""
    done: dict[str, BatchItem] = {}
    if not path.is_file():  # not there yet (or a device such as /dev/null)
        return done
    for record in read_records(path):
        try:
            k = record["key"]
            item = BatchItem(
                input=record["input"],
                output=record["output"],
                error=record["error"],
                seconds=record["seconds"],
            )
        except KeyError:
            continue  # a JSON line that is not one of ours
        if item.ok:
            done[k] = item
        else:
            done.pop(k, None)
    return done


def _record(key: str, item: BatchItem) -> dict[str, Any]:
    return {
        "key": key,
        "input": _jsonable(item.input),
        "output": _jsonable(item.output),
        "error": item.error,
        "seconds": round(item.seconds, 6),
    }


def _jsonable(value: Any) -> Any:
    """The JSON form of an input or output; its `str()` when that form cannot be made."""
    try:
        to_state = getattr(value, "to_state", None)
        if callable(to_state):
            return to_state()
        if hasattr(value, "model_dump"):
            return value.model_dump(mode="json")
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
    except Exception:  # a to_state or a dump that fails: the record keeps its text
        return as_text(value)
    return value


class _Progress:
    """`\\r12/40 done, 1 failed, 3s` on stderr, redrawn at most ten times a second."""

    def __init__(self, total: int, skipped: int, enabled: bool | None):
        stream = sys.stderr
        self.enabled = stream.isatty() if enabled is None else enabled
        self.total, self.done, self.failed = total, skipped, 0
        self.started = self.drawn = time.monotonic()
        if self.enabled:
            self._draw(stream)

    def update(self, item: BatchItem) -> None:
        self.done += 1
        self.failed += not item.ok
        now = time.monotonic()
        if self.enabled and now - self.drawn >= 0.1:
            self.drawn = now
            self._draw(sys.stderr)

    def close(self) -> None:
        if self.enabled:
            self._draw(sys.stderr)
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _draw(self, stream: TextIO) -> None:
        elapsed = time.monotonic() - self.started
        stream.write(
            f"\r{self.done}/{self.total} done, {self.failed} failed, {elapsed:.0f}s".ljust(40)
        )
        stream.flush()
