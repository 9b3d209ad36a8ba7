"""Journal records are bound to their run (format 2): each carries a checksum chained from
the run's id and nonce through every record before it, checked as the journal is read. A
record edited by hand, copied from another run (or from an earlier run under the same id),
dropped or moved is a `CheckpointError` naming its seq; a write that failed part-way does
not break the chain (issue 19, journal records carry nothing that binds them to their run).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentloops import (
    CheckpointError,
    MemoryStore,
    ModelError,
    ReActLoop,
    SQLiteStore,
    StoreError,
    ToolCall,
    tool,
)
from agentloops.engine._chain import Chain
from agentloops.journal import Entry, JournalRecord, Lease
from agentloops.testing import ScriptedModel, use_tools


@tool
def look(key: str) -> str:
    """Look a key up."""
    return key.upper()


def finished(store: Any, run_id: str = "r1", key: str = "a") -> list[JournalRecord]:
    """A finished ReAct run with one tool call: model, tool_started, tool_finished, model,
    result."""
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": key})), f"{key}!"])
    ReActLoop(model, [look], store=store).run("q", run_id=run_id)
    records: list[JournalRecord] = store.read(run_id)
    return records


def refused(store: Any, run_id: str = "r1") -> CheckpointError:
    loop = ReActLoop(ScriptedModel([]), [look], store=store)
    with pytest.raises(CheckpointError) as caught:
        loop.resume(run_id)
    with pytest.raises(CheckpointError):
        loop.status(run_id)
    assert not store.run_info(run_id).leased
    return caught.value


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Any:
    with SQLiteStore(tmp_path / "runs.db", synchronous="NORMAL") as store:
        yield store


def test_every_record_carries_its_checksum_and_the_header_its_nonce(sqlite_store: Any) -> None:
    records = finished(sqlite_store)
    sums = [r.data["sum"] for r in records]
    assert len(set(sums)) == len(records) and all(len(s) == 32 for s in sums)
    meta = sqlite_store.run_info("r1").meta
    assert meta["format"] == 2 and len(meta["nonce"]) == 12


def test_a_record_edited_by_hand_is_refused(sqlite_store: Any) -> None:
    finished(sqlite_store)
    with closing(sqlite_store.connect()) as conn:
        conn.execute(
            "UPDATE agentloops_journal SET data = replace(data, '\"A\"', '\"B\"')"
            " WHERE run_id = 'r1' AND seq = 3"
        )
    error = refused(sqlite_store)
    assert (error.seq, error.field) == (3, "sum")
    assert "record 3 (tool_finished) has a checksum that does not match" in str(error)


def test_a_record_dropped_by_hand_is_refused(sqlite_store: Any) -> None:
    finished(sqlite_store)
    with closing(sqlite_store.connect()) as conn:
        conn.execute("DELETE FROM agentloops_journal WHERE run_id = 'r1' AND seq = 2")
    assert refused(sqlite_store).seq == 3  # the first that no longer follows


def test_records_swapped_by_hand_are_refused(sqlite_store: Any) -> None:
    finished(sqlite_store)
    with closing(sqlite_store.connect()) as conn:
        conn.execute("UPDATE agentloops_journal SET seq = -1 WHERE run_id = 'r1' AND seq = 2")
        conn.execute("UPDATE agentloops_journal SET seq = 2 WHERE run_id = 'r1' AND seq = 3")
        conn.execute("UPDATE agentloops_journal SET seq = 3 WHERE run_id = 'r1' AND seq = -1")
    assert refused(sqlite_store).seq == 2


def _append_raw(store: Any, run_id: str, entries: Sequence[Entry]) -> None:
    """Append through the store's own API, as a script holding the lease would: nothing
    seals these records."""
    lease: Lease = store.acquire(run_id, ttl=30)
    store.append_many(lease, entries)
    store.release(lease)


def test_a_record_copied_from_another_run_is_refused() -> None:
    """Run r1 failed asking for its answer; r2, the same task, got one. r2's answer copied
    into r1's journal, with its checksum, is refused: it is chained to r2."""
    store = MemoryStore()
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), ModelError("down")])
    with pytest.raises(ModelError):
        ReActLoop(model, [look], store=store).run("q", run_id="r1")
    answer = finished(store, "r2")[3]
    assert answer.kind == "model"
    copied = {**answer.data, "run": "r1"}  # made to look like r1's own
    _append_raw(store, "r1", [("model", copied)])
    error = refused(store)
    assert (error.seq, error.field) == (5, "sum")


def test_a_record_of_an_earlier_run_under_the_same_id_is_refused() -> None:
    """Delete a run and start another under its id: a record kept from the first (a backup
    restored into the new journal) is chained to the first run's nonce, not this one's."""
    store = MemoryStore()
    old = finished(store)
    store.delete("r1")
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), ModelError("down")])
    with pytest.raises(ModelError):
        ReActLoop(model, [look], store=store).run("q", run_id="r1")
    assert [r.kind for r in store.read("r1")] == [r.kind for r in old[:3]] + ["failed"]
    restored = old[3]  # the second model reply, from the deleted run
    _append_raw(store, "r1", [(restored.kind, restored.data)])
    assert refused(store).seq == 5


def test_a_record_appended_without_a_checksum_is_refused() -> None:
    store = MemoryStore()
    finished(store)
    _append_raw(store, "r1", [("annotation", {"note": "by hand"})])
    error = refused(store)
    assert error.seq == 6 and "has no checksum" in str(error)


class CommitsThenFails(MemoryStore):
    """A store whose connection drops after a commit: the `fail_at`-th `append_many`
    writes its records, then raises `StoreError`, as a lost reply from a database does."""

    def __init__(self, fail_at: int):
        super().__init__()
        self.appends = 0
        self.fail_at = fail_at

    def append_many(self, lease: Lease, entries: Sequence[Entry], **kw: Any) -> Any:
        written = super().append_many(lease, entries, **kw)
        self.appends += 1
        if self.appends == self.fail_at:
            raise StoreError("connection lost after the commit", run_id=lease.run_id)
        return written


def test_a_write_in_doubt_leaves_the_chain_whole() -> None:
    """The write of the tool's outcome commits, and its reply is lost: the run fails, and
    the record saying so is chained to the outcome's record (read back), not to what was
    there before it; the run resumes."""
    store = CommitsThenFails(fail_at=2)  # 1: the model reply and the call's start; 2: its end
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), "A!"])
    with pytest.raises(StoreError, match="connection lost"):
        ReActLoop(model, [look], store=store).run("q", run_id="r1")
    assert [r.kind for r in store.read("r1")] == [
        "model",
        "tool_started",
        "tool_finished",
        "failed",
    ]
    result = ReActLoop(model, [look], store=store).resume("r1")
    assert result.answer == "A!" and result.tool_calls == 1


class CommitsThenFailsEncoded(MemoryStore):
    """`CommitsThenFails` on the engine's own path: records encoded once, written through
    `_append_records` (as a MemoryStore or SQLiteStore is written by a live run)."""

    def __init__(self, fail_at: int):
        super().__init__()
        self.appends = 0
        self.fail_at = fail_at

    def _append_records(self, lease: Lease, new: Any, after: Any, status: Any) -> int:
        seq = super()._append_records(lease, new, after, status)
        self.appends += 1
        if self.appends == self.fail_at:
            raise StoreError("connection lost after the commit", run_id=lease.run_id)
        return seq


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_write_in_doubt_on_the_encoded_path_leaves_the_chain_whole(driver: str) -> None:
    store = CommitsThenFailsEncoded(fail_at=2)
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), "A!"])
    loop = ReActLoop(model, [look], store=store)
    with pytest.raises(StoreError, match="connection lost"):
        if driver == "sync":
            loop.run("q", run_id="r1")
        else:
            asyncio.run(loop.arun("q", run_id="r1"))
    kinds = [r.kind for r in store.read("r1")]
    assert kinds == ["model", "tool_started", "tool_finished", "failed"]
    assert store.appends >= 3  # the records went through the encoded path
    result = ReActLoop(model, [look], store=store).resume("r1")
    assert result.answer == "A!" and result.tool_calls == 1


def test_encoding_once_gives_the_checksums_and_data_sealing_gives() -> None:
    """`Chain.encode` (the live path) and `Chain.seal` (the general one) agree on every
    checksum, and the stored text reads back as the sealed data."""
    entries: list[Entry] = [
        ("model", {"b": 1, "a": "\u00e9 \ud800", "z": [1.5, None, {"y": True, "x": {}}]}),
        ("tool_started", {"id": "c1"}, "k1"),
        ("event", {}),
    ]
    sealed, last = Chain("r1", "n").seal(entries)
    encoded = Chain("r1", "n").encode(entries)
    assert encoded is not None and encoded[1] == last
    for (kind, data, key), record in zip(sealed, encoded[0], strict=True):
        assert (record.kind, record.key, json.loads(record.data)) == (kind, key, data)


@pytest.mark.parametrize(
    "entry",
    [
        ("model", {"x": float("nan")}),
        ("model", {1: 2, "a": 3}),
        ("model", {"sum": "x"}),
        ("", {}),
        ("model", {}, ""),
    ],
)
def test_what_encoding_once_cannot_take_goes_the_general_way(entry: Any) -> None:
    assert Chain("r1", "n").encode([entry]) is None
    assert Chain("r1", "n").encode([("tool_started", {}, "k"), ("tool_started", {}, "k")]) is None


def test_a_format_1_journal_has_no_checksums_and_still_resumes() -> None:
    """What a format 1 journal gets: its records are checked against their schemas, but it
    has no chain to check (and what is appended to it gets none: a journal is chained from
    its first record or not at all)."""
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=30, meta={"format": 1, "task": "q"})
    store.release(lease)
    result = ReActLoop(ScriptedModel(["Hi."]), [look], store=store).resume("r1")
    assert result.answer == "Hi."
    assert all("sum" not in r.data for r in store.read("r1"))
    assert "nonce" not in store.run_info("r1").meta


def test_a_format_2_header_without_its_nonce_is_refused() -> None:
    store = MemoryStore()
    store.release(store.start("r1", kind="react", ttl=30, meta={"format": 2, "task": "q"}))
    error = refused(store)
    assert error.field == "nonce" and "has no nonce" in str(error)


def test_the_chain_is_checked_on_sqlite_read_back_as_written(tmp_path: Path) -> None:
    """Key order, unicode and lone surrogates read back as written, so checksums hold."""
    with SQLiteStore(tmp_path / "runs.db") as store:
        model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "é\ud800 z"})), "ok"])
        ReActLoop(model, [look], store=store).run("q", run_id="r1")
        assert ReActLoop(ScriptedModel([]), [look], store=store).resume("r1").answer == "ok"
    with closing(sqlite3.connect(tmp_path / "runs.db")) as conn:
        (count,) = conn.execute("SELECT count(*) FROM agentloops_journal").fetchone()
    assert count == 5
