"""Resume streams the journal (issue 26, item 5): it is read and checked a page at a time
(the checksum chain and each record's schema, with the same errors), what the replay must
know first comes from that streaming pass, and the replay then reads the journal again as
the machine asks, holding only the records read ahead: never the whole journal.

Here a page is 3 records, and the store counts the records it handed out that are still
alive: at most a page and the look-ahead at once, for a journal of hundreds.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentloops import (
    CallInDoubt,
    CheckpointError,
    MemoryStore,
    ReActLoop,
    RunNotFound,
    StoreError,
    ToolCall,
    tool,
)
from agentloops.engine._chain import FIELD, digest
from agentloops.journal import JournalRecord, _base
from agentloops.testing import ScriptedModel, ScriptExhausted, use_tools

STEPS = 60  # 3 records a step: a model reply, a tool call's start and its finish


class Crash(BaseException):
    """The process dies in the middle of a tool call."""


class Counted(JournalRecord):
    """A record handed out by `Counting`, counted while it is alive."""

    alive = 0
    most = 0

    def __init__(self, **fields: Any):
        super().__init__(**fields)
        Counted.alive += 1
        Counted.most = max(Counted.most, Counted.alive)

    def __del__(self) -> None:
        Counted.alive -= 1


class Counting(MemoryStore):
    """A store that counts, once `counting`, how many records it reads at once and how many
    of them are alive at the same time."""

    counting = False
    read_to: list[int]

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> Any:
        records = super().read(run_id, after=after, limit=limit)
        if not self.counting:
            return records
        assert limit is not None, "the whole journal read at once"
        self.read_to.append(after + len(records))
        fields = ("run_id", "seq", "kind", "data", "key", "at")
        return [Counted(**{f: getattr(r, f) for f in fields}) for r in records]

    def count(self) -> None:
        self.counting, self.read_to = True, []
        Counted.alive = Counted.most = 0


@pytest.fixture(autouse=True)
def _pages_of_three(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "PAGE", 3)


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@tool(read_only=False)
def charge(key: str) -> str:
    """Charges a card."""
    raise Crash


def long_run(last: Any = None) -> Counting:
    """A store holding run "r1": `STEPS` tool calls, then the model fails (status
    "failed"), or (`last`) one more call, that crashes."""
    replies = [use_tools(("add", {"a": i, "b": 1})) for i in range(STEPS)]
    store = Counting()
    model = ScriptedModel(replies + ([] if last is None else [use_tools(last)]))
    tools = [add] if last is None else [add, charge]
    loop = ReActLoop(model, tools, store=store, max_steps=STEPS + 3)
    with pytest.raises(ScriptExhausted if last is None else Crash):
        loop.run("go", run_id="r1")
    return store


@tool(name="add")
def never(a: int, b: int) -> str:
    """Add two integers."""
    raise AssertionError("a replayed call is not made again")


def test_a_long_journal_resumes_holding_a_page_and_the_look_ahead() -> None:
    store = long_run()
    records = store.run_info("r1").last_seq
    store.count()
    loop = ReActLoop(ScriptedModel(["done"]), [never], store=store, max_steps=STEPS + 3)
    assert loop.resume("r1").answer == "done"
    assert records > 3 * STEPS
    assert Counted.most <= 8  # a page (3) and what was read ahead, not 180 records
    assert max(store.read_to) == records  # checked to its end, then replayed from its start
    assert store.read_to.count(3) == 2


def test_status_streams_the_journal_too() -> None:
    store = long_run()
    store.count()
    loop = ReActLoop(ScriptedModel([]), [never], store=store, max_steps=STEPS + 3)
    assert loop.status("r1").stop_reason == "running"  # as it was (the model failed at its end)
    assert Counted.most <= 8


def resumer(store: MemoryStore) -> ReActLoop:
    return ReActLoop(ScriptedModel(["done"]), [never], store=store, max_steps=STEPS + 3)


def damaged(store: MemoryStore, seq: int, edit: Any) -> None:
    """Edit record `seq` of run "r1" where the store keeps it (its checksum left as is)."""
    run = store._runs["r1"]
    kind, key, data, at = run.records[seq - 1]
    value = json.loads(data) if isinstance(data, str) else data
    edit(value)
    run.records[seq - 1] = (kind, key, json.dumps(value) if isinstance(data, str) else value, at)


def test_a_damaged_record_mid_stream_is_a_checkpoint_error_naming_its_seq() -> None:
    store = long_run()
    seq = 90  # a tool call's finish, half way: the chain follows, its schema does not
    assert store.read("r1", after=seq - 1, limit=1)[0].kind == "tool_finished"
    run = store._runs["r1"]
    kind, key, data, at = run.records[seq - 1]
    value = json.loads(data) if isinstance(data, str) else dict(data)
    value["outcome"]["content"] = 42
    previous = store.read("r1", after=seq - 2, limit=1)[0].data[FIELD]
    value[FIELD] = digest(previous, kind, key, value)  # sealed, as a buggy writer would
    run.records[seq - 1] = (kind, key, json.dumps(value) if isinstance(data, str) else value, at)
    store.count()
    with pytest.raises(CheckpointError) as caught:
        resumer(store).resume("r1")
    error = caught.value
    assert (error.run_id, error.seq, error.field) == ("r1", seq, "outcome.content")
    assert max(store.read_to) <= seq + 2  # stopped at the page that holds it
    assert not store.run_info("r1").leased


def test_a_checksum_break_mid_stream_names_the_record() -> None:
    store = long_run()
    seq = 100
    damaged(store, seq, lambda data: data.update(run="elsewhere"))
    store.count()
    with pytest.raises(CheckpointError, match="checksum that does not match") as caught:
        resumer(store).resume("r1")
    assert (caught.value.seq, caught.value.field) == (seq, "sum")
    assert max(store.read_to) <= seq + 2
    assert not store.run_info("r1").leased


def test_a_call_in_doubt_at_the_end_of_a_long_journal_is_found_by_the_streaming_pass() -> None:
    store = long_run(last=ToolCall("pay", "charge", {"key": "k"}))
    store.count()
    loop = ReActLoop(ScriptedModel(["paid"]), [never, charge], store=store, max_steps=STEPS + 3)
    with pytest.raises(CallInDoubt, match="resume with") as info:
        loop.resume("r1")
    assert [c.id for c in info.value.calls] == ["pay"]
    assert store.run_info("r1").status == "in_doubt"
    assert Counted.most <= 8
    store.counting = False  # a decision reads the journal whole (what it decides is checked)
    skipped = loop.resume("r1", {"pay": "skip"})
    assert skipped.answer == "paid"


def test_the_async_driver_resumes_holding_a_page_and_the_look_ahead() -> None:
    store = long_run()
    store.count()
    loop = ReActLoop(ScriptedModel(["done"]), [never], store=store, max_steps=STEPS + 3)
    assert asyncio.run(loop.aresume("r1")).answer == "done"
    assert Counted.most <= 8


def test_each_store_reads_its_records_a_page_at_a_time(durable_store: Any) -> None:
    lease = durable_store.start("p", kind="k", ttl=30)
    durable_store.append_many(lease, [("x", {"i": i}) for i in range(7)])
    assert [r.seq for r in durable_store.iter_records("p", page=3)] == [1, 2, 3, 4, 5, 6, 7]
    assert [r.seq for r in durable_store.iter_records("p", after=2, page=2, until=5)] == [3, 4, 5]
    assert [r.data["i"] for r in durable_store.iter_records("p", after=6)] == [6]
    assert list(durable_store.iter_records("p", after=7)) == []
    with pytest.raises(RunNotFound):
        list(durable_store.iter_records("nobody"))
    with pytest.raises(ValueError, match="page"):
        list(durable_store.iter_records("p", page=0))


class Failing(Counting):
    """A store whose reads fail from the `fail_at`-th one on."""

    fail_at = 0
    reads = 0

    def read(self, run_id: str, *, after: int = 0, limit: int | None = None) -> Any:
        self.reads += 1
        if self.fail_at and self.reads >= self.fail_at:
            raise StoreError("the disk went away")
        return super().read(run_id, after=after, limit=limit)


def test_a_failed_read_during_the_replay_is_the_stores_error_and_records_nothing() -> None:
    replies = [use_tools(("add", {"a": i, "b": 1})) for i in range(STEPS)]
    store = Failing()
    loop = ReActLoop(ScriptedModel(replies), [add], store=store, max_steps=STEPS + 3)
    with pytest.raises(ScriptExhausted):
        loop.run("go", run_id="r1")
    before = store.run_info("r1")
    store.fail_at = store.reads + 90  # the journal is checked (61 pages), then replayed
    with pytest.raises(StoreError, match="the disk went away"):
        resumer(store).resume("r1")
    store.fail_at = 0
    after = store.run_info("r1")
    assert (after.last_seq, after.status, after.leased) == (before.last_seq, "failed", False)
