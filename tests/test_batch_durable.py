"""`run_many(fn, inputs, store=..., key=...)` on a thread pool: each item a durable run whose
id comes from its key; an item stopped part-way is resumed by the next call from its
journal (no recorded call repeated), a finished one comes back from it; a lease a dead
attempt holds is waited out. (A Dask worker killed mid-item: tests/test_dask.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _refusing import Refusing

from agentloops import (
    ConfigurationError,
    DurableItem,
    MemoryStore,
    Message,
    ModelError,
    ModelResponse,
    ReActLoop,
    RunLeased,
    SQLiteStore,
    ToolCall,
    idempotency_key,
    run_many,
    tool,
)
from agentloops.testing import FunctionModel

RAN: list[str] = []
ASKED: list[int] = []
BROKEN: set[int] = set()


@tool
def credit(step: int) -> str:
    """Credit one step (its idempotency key, without the run's nonce, in RAN)."""
    RAN.append(idempotency_key().split("@")[0])
    return f"credited {step}"


def loop_for(n: int, item: DurableItem) -> ReActLoop:
    """Two tool calls, then an answer; the model is down at the second call for the
    inputs in BROKEN."""

    def answer(request: Any) -> Any:
        done = sum(len(m.tool_results) for m in request.messages)
        ASKED.append(n)
        if done == 1 and n in BROKEN:
            raise ModelError("the model server is unreachable", status=503)
        if done < 2:
            call = ToolCall(f"c{done + 1}", "credit", {"step": done + 1})
            return ModelResponse(Message("assistant", (call,)), "tool_use")
        return f"done {n}"

    return ReActLoop(FunctionModel(answer), [credit], store=item.store, lease_ttl=0.5)


def work(n: int, item: DurableItem) -> str:
    return str(item.drive(loop_for(n, item), f"Item {n}").answer)


def awork(n: int, item: DurableItem) -> str:
    """`work`, driven by `item.adrive` on an event loop."""
    return str(asyncio.run(item.adrive(loop_for(n, item), f"Item {n}")).answer)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()
    ASKED.clear()
    BROKEN.clear()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "runs.db")


def test_an_item_stopped_part_way_is_resumed_by_the_next_call(store: Any) -> None:
    BROKEN.add(1)
    first = run_many(work, [0, 1, 2], store=store, key=lambda n: f"job-{n}", progress=False)
    assert [it.error for it in first] == [
        None,
        "ModelError: the model server is unreachable",
        None,
    ]
    assert sorted(RAN) == ["job-0:c1", "job-0:c2", "job-1:c1", "job-2:c1", "job-2:c2"]
    BROKEN.clear()
    RAN.clear()
    ASKED.clear()
    again = run_many(work, [0, 1, 2], store=store, key=lambda n: f"job-{n}", progress=False)
    assert [it.output for it in again] == ["done 0", "done 1", "done 2"]
    assert RAN == ["job-1:c2"]  # only what was not on record
    assert ASKED == [1, 1]  # the finished items came back from their journals


def test_run_ids_come_from_the_key_or_a_digest_of_the_input(store: Any) -> None:
    run_many(work, [3], store=store, progress=False)
    [info] = store.list_runs()
    assert info.run_id.startswith("item-") and len(info.run_id) == 29
    run_many(work, [3], store=store, progress=False)  # the same input: the same run
    assert len(store.list_runs()) == 1 and len(RAN) == 2


def test_inputs_that_share_a_run_id_and_bad_keys_are_refused(store: Any) -> None:
    with pytest.raises(ConfigurationError, match="inputs 0 and 2 have the same run id 'x'"):
        run_many(work, [1, 2, 3], store=store, key=lambda n: "x" if n != 2 else "y")
    with pytest.raises(ConfigurationError, match="key must give each input a non-empty string"):
        run_many(work, [1], store=store, key=lambda n: n)  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigurationError, match="no JSON form to make its run id from"):
        run_many(work, [object()], store=store)
    assert RAN == [] and store.list_runs() == []


def test_a_lease_a_dead_attempt_holds_is_waited_out(store: Any) -> None:
    BROKEN.add(4)
    run_many(work, [4], store=store, key=str, progress=False)
    store.acquire("4", ttl=0.6)  # a holder that died holding it: it lapses in 0.6 s
    BROKEN.clear()
    [item] = run_many(work, [4], store=store, key=str, progress=False)
    assert item.output == "done 4" and RAN == ["4:c1", "4:c2"]
    store.acquire("4", ttl=30)
    [late] = run_many(work, [4], store=store, key=str, progress=False, lease_wait=0.3)
    assert late.error is not None and late.error.startswith("RunLeased")
    assert RunLeased.__name__ in late.error


def test_adrive_asks_nothing_of_the_default_executor() -> None:
    async def twice() -> tuple[str, str]:
        asyncio.get_running_loop().set_default_executor(Refusing())
        item = DurableItem("6", MemoryStore())
        first = await item.adrive(loop_for(6, item), "Item 6")
        again = await item.adrive(loop_for(6, item), "Item 6")  # finished: from its journal
        return first.answer, again.answer

    assert asyncio.run(twice()) == ("done 6", "done 6")
    assert RAN == ["6:c1", "6:c2"]


def test_adrive_resumes_on_the_event_loop_and_waits_out_a_lease(store: Any) -> None:
    BROKEN.add(5)
    [failed] = run_many(awork, [5], store=store, key=str, progress=False)
    assert failed.error == "ModelError: the model server is unreachable"
    BROKEN.clear()
    store.acquire("5", ttl=0.6)
    [item] = run_many(awork, [5], store=store, key=str, progress=False)
    assert item.output == "done 5" and RAN == ["5:c1", "5:c2"]
    store.acquire("5", ttl=30)
    [late] = run_many(awork, [5], store=store, key=str, progress=False, lease_wait=0.3)
    assert late.error is not None and late.error.startswith("RunLeased")
