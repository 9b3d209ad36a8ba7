"""Durable batch items: `run_many(fn, inputs, store=...)` makes each item a durable run.

Each input's run id comes from its key (`run_id_for`); `fn(input, item)` builds its loop
over `item.store` and calls `item.drive(loop, task)`, which starts the run under that id
or, when an earlier attempt started it (a Dask worker killed mid-item, an interrupted
`run_many`), resumes it from its journal: nothing on record runs again, and a finished
run gives back its result without calling anything. A dead attempt's lease is waited out
(up to `lease_wait` seconds).

Rule: part of the batch kit; it knows the run stores and the loops' `run`/`resume`
methods by name (duck-typed), never a loop class.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentloops import _pool
from agentloops.errors import ConfigurationError, RunExists, RunLeased, RunNotFound
from agentloops.journal.records import RunStore


@dataclass(frozen=True, slots=True)
class DurableItem:
    """One input's durable run: its id and the store it is journaled in (what `fn` gets
    next to the input when `run_many` has a `store`)."""

    run_id: str
    store: RunStore
    lease_wait: float = 120.0
    """Seconds `drive` waits for a lease another attempt holds (a dead worker's lapses
    after the loop's `lease_ttl`) before it gives up with `RunLeased`."""

    def drive(self, loop: Any, task: Any) -> Any:
        """`loop.run(task, run_id=...)` the first time, `loop.resume(run_id)` after: the
        item's result, from the journal as far as it goes, then live.

        Raises:
            RunLeased: another attempt still held the run after `lease_wait` seconds.
        """
        deadline = time.monotonic() + self.lease_wait
        while True:
            try:
                if self._exists():
                    return loop.resume(self.run_id)
                return loop.run(task, run_id=self.run_id)
            except RunExists:
                continue  # another attempt started it just now: resume it
            except RunLeased as exc:
                time.sleep(self._pause(exc, deadline))

    async def adrive(self, loop: Any, task: Any) -> Any:
        """`drive` on the event loop (`arun` / `aresume`)."""
        deadline = time.monotonic() + self.lease_wait
        while True:
            try:
                if await _pool.call(self._exists, pool=_pool.own):  # store I/O: off the loop
                    return await loop.aresume(self.run_id)
                return await loop.arun(task, run_id=self.run_id)
            except RunExists:
                continue
            except RunLeased as exc:
                await asyncio.sleep(self._pause(exc, deadline))

    def _exists(self) -> bool:
        try:
            self.store.run_info(self.run_id)
        except RunNotFound:
            return False
        return True

    @staticmethod
    def _pause(exc: RunLeased, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise exc
        return min(0.25, left)


class WithItem:
    """`fn(input, item)` as a one-argument function of a `(run id, input)` pair (what an
    executor runs). Pickled, it carries the store as bytes, unpickled where it is first
    called: a scheduler that unpickles tasks (Dask's does) opens no store connection."""

    def __init__(self, fn: Callable[[Any, DurableItem], Any], store: RunStore, lease_wait: float):
        self.fn, self.lease_wait = fn, lease_wait
        self._store: RunStore | None = store
        self._packed: bytes | None = None

    def __getstate__(self) -> dict[str, Any]:
        store, packed = self._store, self._packed
        if packed is None and store is not None:
            try:
                packed, store = pickle.dumps(store), None
            except Exception:  # pickled as it is, then (the executor's pickler may cope)
                packed = None
        return {"fn": self.fn, "lease_wait": self.lease_wait, "store": store, "packed": packed}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.fn, self.lease_wait = state["fn"], state["lease_wait"]
        self._store, self._packed = state["store"], state["packed"]

    def __call__(self, pair: tuple[str, Any]) -> Any:
        if self._store is None:
            assert self._packed is not None
            self._store = pickle.loads(self._packed)  # here, where the work runs
        run_id, value = pair
        return self.fn(value, DurableItem(run_id, self._store, self.lease_wait))


def run_id_for(key: Callable[[Any], str] | None, value: Any, index: int) -> str:
    """An input's run id: `key(input)`, or `"item-"` and a digest of its canonical JSON."""
    if key is not None:
        run_id = key(value)
        if not isinstance(run_id, str) or not run_id:
            raise ConfigurationError(
                f"key must give each input a non-empty string (its run id); input {index} "
                f"({value!r:.60}) got {run_id!r}"
            )
        return run_id
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"input {index} ({value!r:.60}) has no JSON form to make its run id from "
            f"({exc}); pass key=... to name each input's run"
        ) from exc
    return "item-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def check_store(store: RunStore, executor_name: str | None) -> None:
    """A `MemoryStore` cannot be shared with other processes: refused for such executors."""
    from agentloops.journal.memory import MemoryStore

    if executor_name is not None and isinstance(store, MemoryStore):
        raise ConfigurationError(
            f"store=MemoryStore() lives in this process; the items run in other processes "
            f"({executor_name}): give a SQLiteStore (one machine) or a PostgresStore"
        )
