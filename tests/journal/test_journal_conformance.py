"""The run store contract, the same tests for every backend: memory, SQLite, PostgreSQL.

The PostgreSQL tests need a server (`AGENTLOOPS_TEST_POSTGRES`; `.ci/run` starts one) and
are skipped without it. Tests that need a lease to lapse use short TTLs and sleep past them.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    JournalConflict,
    Lease,
    LeaseLost,
    RunExists,
    RunLeased,
    RunNotFound,
    RunStore,
    StoreError,
)

BACKENDS = ["memory", "sqlite", "postgres"]
SHORT = 0.05  # a TTL that has lapsed by the time we sleep LAPSE
LAPSE = 0.06


@pytest.fixture
def store(durable_store: RunStore) -> RunStore:
    """Each backend in turn (`durable_store` in tests/conftest.py; PostgreSQL only when a
    server is set)."""
    return durable_store


def lapse(lease: Lease) -> None:
    """Sleep until `lease` has expired (all the stores' clocks are this machine's here)."""
    time.sleep(max(0.0, (lease.expires_at - datetime.now(timezone.utc)).total_seconds()) + LAPSE)


def kinds(store: RunStore, run_id: str = "r1") -> list[str]:
    return [r.kind for r in store.read(run_id)]


# --- runs and their header ------------------------------------------------------------


def test_satisfies_the_protocol(store: RunStore) -> None:
    assert isinstance(store, RunStore)


def test_store_errors_are_agentloops_errors() -> None:
    from agentloops import AgentLoopsError

    for error in (RunNotFound, RunExists, RunLeased, LeaseLost, JournalConflict):
        assert issubclass(error, StoreError)
    assert issubclass(StoreError, AgentLoopsError)


def test_start_creates_a_held_run_with_an_empty_journal(store: RunStore) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    lease = store.start("r1", kind="react", ttl=30, holder="worker-a", meta={"task": "x"})
    assert (lease.run_id, lease.holder, lease.epoch, lease.ttl) == ("r1", "worker-a", 1, 30.0)
    assert lease.expires_at.tzinfo is not None
    assert before + timedelta(seconds=29) < lease.expires_at < before + timedelta(seconds=32)
    info = store.run_info("r1")
    assert (info.run_id, info.kind, info.status, info.meta) == (
        "r1",
        "react",
        "running",
        {"task": "x"},
    )
    assert (info.holder, info.epoch, info.last_seq, info.leased) == ("worker-a", 1, 0, True)
    assert info.lease_expires_at == lease.expires_at
    assert before < info.created_at <= info.updated_at
    assert store.read("r1") == []


def test_start_generates_a_holder_id_naming_host_and_process(store: RunStore) -> None:
    import os

    first = store.start("r1", kind="react", ttl=30)
    second = store.start("r2", kind="react", ttl=30)
    assert first.holder.split(":")[1] == str(os.getpid())
    assert first.holder != second.holder


def test_start_of_a_taken_id_raises_run_exists_and_changes_nothing(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30, meta={"v": 1})
    store.append(lease, "model")
    with pytest.raises(RunExists) as caught:
        store.start("r1", kind="rewoo", ttl=30, meta={"v": 2})
    assert caught.value.run_id == "r1"
    info = store.run_info("r1")
    assert (info.kind, info.meta, info.epoch, info.last_seq) == ("react", {"v": 1}, 1, 1)


def test_start_may_set_the_first_status(store: RunStore) -> None:
    store.start("r1", kind="react", ttl=30, status="queued")
    assert store.run_info("r1").status == "queued"


def test_unknown_runs_raise_run_not_found(store: RunStore) -> None:
    for call in (
        lambda: store.run_info("nope"),
        lambda: store.read("nope"),
        lambda: store.acquire("nope", ttl=30),
    ):
        with pytest.raises(RunNotFound) as caught:
            call()
        assert caught.value.run_id == "nope"
    assert store.find("nope", kind="decision", key="c1") is None
    assert store.delete("nope") is False


def test_update_run_changes_status_and_replaces_meta(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30, meta={"a": 1, "b": 2})
    info = store.update_run(lease, status="paused")
    assert (info.status, info.meta) == ("paused", {"a": 1, "b": 2})
    info = store.update_run(lease, meta={"c": 3})
    assert (info.status, info.meta) == ("paused", {"c": 3})
    assert store.run_info("r1") == info


def test_list_runs_oldest_first_with_filters(store: RunStore) -> None:
    a = store.start("b-first", kind="react", ttl=30)
    store.start("a-second", kind="rewoo", ttl=30)
    store.start("c-third", kind="react", ttl=30, status="paused")
    store.release(a)
    runs = store.list_runs()
    assert [r.run_id for r in runs] == ["b-first", "a-second", "c-third"]
    assert [r.leased for r in runs] == [False, True, True]
    assert runs[0].holder is None and runs[0].lease_expires_at is None
    assert [r.run_id for r in store.list_runs(kind="react")] == ["b-first", "c-third"]
    assert [r.run_id for r in store.list_runs(status="paused")] == ["c-third"]
    assert store.list_runs(status="paused", kind="rewoo") == []


def test_run_info_reports_the_last_append(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    created = store.run_info("r1").updated_at
    record = store.append_many(lease, [("a", {}), ("b", {})])[-1]
    info = store.run_info("r1")
    assert info.last_seq == 2
    assert info.updated_at >= max(created, record.at)


def test_list_runs_marks_an_expired_lease_as_not_leased(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=SHORT)
    lapse(lease)
    (info,) = store.list_runs()
    assert info.holder == lease.holder and info.leased is False
    assert store.run_info("r1").leased is False


# --- the journal ------------------------------------------------------------------------


def test_append_numbers_records_and_read_returns_them_in_order(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    records = [
        store.append(lease, kind, {"i": i}) for i, kind in enumerate(["started", "model", "model"])
    ]
    assert [r.seq for r in records] == [1, 2, 3]
    assert store.read("r1") == records
    assert store.read("r1", after=1) == records[1:]
    assert store.read("r1", after=3) == []
    assert all(r.at.tzinfo is not None for r in records)
    assert records[0].at <= records[1].at <= records[2].at


JSON_VALUES: list[Any] = [
    {"z": 1, "a": 2, "m": 3},  # key order is kept
    {"text": "é 中文 🙂", "nul": "a\x00b", "lone": "\ud800", "quote": "\"'\\"},
    {"n": [0, -1, 2**62, 1.5, 1e-300], "t": True, "f": False, "none": None},
    {"deep": {"a": [{"b": [[], {}]}]}},
    {},
]


@pytest.mark.parametrize("data", JSON_VALUES, ids=["order", "text", "numbers", "deep", "empty"])
def test_data_round_trips_exactly(store: RunStore, data: dict[str, Any]) -> None:
    lease = store.start("r1", kind="react", ttl=30, meta=data)
    record = store.append(lease, "model", data)
    (read,) = store.read("r1")
    for got in (record.data, read.data, store.run_info("r1").meta):
        assert got == data
        assert list(got) == list(data)


def test_reads_are_fresh_copies(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    data = {"items": [1]}
    store.append(lease, "model", data)
    data["items"].append(2)
    store.read("r1")[0].data["items"].append(3)
    assert store.read("r1")[0].data == {"items": [1]}


def test_append_without_data_stores_an_empty_object(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    assert store.append(lease, "started").data == {}


def test_append_many_is_one_transaction(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "decision", {"ok": True}, key="c2")
    batch = [
        ("tool_started", {"id": "c1"}, "c1"),
        ("tool_started", {"id": "c2"}, "c2"),
        ("note", {}),
    ]
    records = store.append_many(lease, batch)
    assert [(r.seq, r.kind, r.key) for r in records] == [
        (2, "tool_started", "c1"),
        (3, "tool_started", "c2"),
        (4, "note", None),
    ]
    assert records[0].at == records[1].at == records[2].at
    with pytest.raises(
        JournalConflict
    ):  # the second entry's key is taken: the first is not written
        store.append_many(lease, [("model", {"new": 1}), ("decision", {"ok": False}, "c2")])
    assert store.run_info("r1").last_seq == 4
    assert kinds(store) == ["decision", "tool_started", "tool_started", "note"]


def test_append_can_set_the_status_in_the_same_transaction(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "finished", {"answer": "42"}, status="finished")
    assert store.run_info("r1").status == "finished"
    with pytest.raises(JournalConflict):
        store.append(lease, "x", after=0, status="failed")
    assert store.run_info("r1").status == "finished"


def test_compare_and_append(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    assert store.append(lease, "a", after=0).seq == 1
    assert store.append_many(lease, [("b", {}), ("c", {})], after=1)[-1].seq == 3
    with pytest.raises(JournalConflict) as caught:
        store.append(lease, "stale", after=1)
    assert caught.value.last_seq == 3 and caught.value.record is None
    assert "after=1" in str(caught.value) and "seq 3" in str(caught.value)
    assert kinds(store) == ["a", "b", "c"]


def test_a_keyed_record_is_unique_per_run_and_kind(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    other = store.start("r2", kind="react", ttl=30)
    first = store.append(lease, "decision", {"approved": True}, key="call_1")
    store.append(lease, "tool_finished", {"ok": 1}, key="call_1")  # another kind
    store.append(other, "decision", {"approved": False}, key="call_1")  # another run
    with pytest.raises(JournalConflict) as caught:
        store.append(lease, "decision", {"approved": False}, key="call_1")
    assert caught.value.record == first
    assert caught.value.last_seq == 2
    assert store.find("r1", kind="decision", key="call_1") == first
    assert store.find("r1", kind="decision", key="call_2") is None
    assert store.find("r2", kind="decision", key="call_1").data == {"approved": False}  # type: ignore[union-attr]
    assert kinds(store) == ["decision", "tool_finished"]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([], "non-empty sequence"),
        ("ab", "non-empty sequence"),
        ([("a",)], "(kind, data)"),
        ([["a", {}]], "(kind, data)"),
        ([("", {})], "kind must be"),
        ([(3, {})], "kind must be"),
        ([("a", {}, "")], "key must be"),
        ([("a", {}, "k"), ("a", {}, "k")], "repeat kind 'a' with key 'k'"),
    ],
)
def test_bad_entries_are_configuration_errors(store: RunStore, entries: Any, message: str) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    with pytest.raises(ConfigurationError) as caught:
        store.append_many(lease, entries)
    assert message in str(caught.value)
    assert store.read("r1") == []


@pytest.mark.parametrize(
    "data", [{"x": {1, 2}}, {"x": math.nan}, {"x": object()}, ["a", "list"], [], "", 0]
)
def test_data_that_is_not_a_json_object_is_refused(store: RunStore, data: Any) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    with pytest.raises(StoreError, match="run 'r1'"):
        store.append(lease, "model", data)
    with pytest.raises(StoreError):
        store.update_run(lease, meta=data)
    assert store.read("r1") == []


@pytest.mark.parametrize("after", [-1, True, 1.5, "1"])
def test_a_bad_after_is_a_configuration_error(store: RunStore, after: Any) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    with pytest.raises(ConfigurationError, match="after"):
        store.append(lease, "a", after=after)
    with pytest.raises(ConfigurationError, match="after"):
        store.read("r1", after=after)


@pytest.mark.parametrize("ttl", [0, -1, math.inf, math.nan, True, "30", None])
def test_a_bad_ttl_is_a_configuration_error(store: RunStore, ttl: Any) -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        store.start("r1", kind="react", ttl=ttl)
    lease = store.start("r1", kind="react", ttl=30)
    store.release(lease)
    with pytest.raises(ConfigurationError, match="ttl"):
        store.acquire("r1", ttl=ttl)
    if ttl is not None:  # None means "the lease's ttl" for renew
        with pytest.raises(ConfigurationError, match="ttl"):
            store.renew(lease, ttl=ttl)


@pytest.mark.parametrize("field", ["run_id", "kind", "holder", "status"])
def test_empty_names_are_configuration_errors(store: RunStore, field: str) -> None:
    args: dict[str, Any] = {"run_id": "r1", "kind": "react", "holder": "h", "status": "running"}
    args[field] = ""
    with pytest.raises(ConfigurationError, match=field):
        store.start(args.pop("run_id"), ttl=30, **args)


# --- leases ---------------------------------------------------------------------------


def test_a_held_run_cannot_be_acquired_and_the_error_names_the_holder(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30, holder="worker-a")
    for holder in ("worker-b", "worker-a"):  # the same holder id too: a lease is not re-entrant
        with pytest.raises(RunLeased) as caught:
            store.acquire("r1", ttl=30, holder=holder)
        assert (caught.value.run_id, caught.value.holder, caught.value.until) == (
            "r1",
            "worker-a",
            lease.expires_at,
        )
        assert "worker-a" in str(caught.value) and lease.expires_at.isoformat() in str(caught.value)
    assert store.run_info("r1").epoch == 1


def test_release_frees_the_run_and_each_acquisition_bumps_the_epoch(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    assert store.release(lease) is True
    assert store.release(lease) is False
    info = store.run_info("r1")
    assert (info.holder, info.lease_expires_at, info.leased) == (None, None, False)
    second = store.acquire("r1", ttl=30, holder="b")
    assert (second.epoch, second.holder) == (2, "b")
    assert store.release(lease) is False  # a stale lease does not free the new holder's
    assert store.run_info("r1").holder == "b"
    store.release(second)
    assert store.acquire("r1", ttl=30).epoch == 3


def test_an_expired_lease_can_be_taken_over(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=SHORT, holder="crashed")
    store.append(lease, "model", {"before": "crash"})
    lapse(lease)
    taken = store.acquire("r1", ttl=30, holder="b")
    assert taken.epoch == 2
    info = store.run_info("r1")
    assert (info.holder, info.epoch, info.leased) == ("b", 2, True)
    assert [r.data for r in store.read("r1")] == [{"before": "crash"}]  # nothing recorded is lost


def test_renew_extends_the_lease_and_keeps_the_epoch(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=5)
    renewed = store.renew(lease, ttl=60)
    assert (renewed.epoch, renewed.holder, renewed.ttl) == (1, lease.holder, 60.0)
    assert renewed.expires_at > lease.expires_at + timedelta(seconds=50)
    assert store.run_info("r1").lease_expires_at == renewed.expires_at
    again = store.renew(renewed)  # the lease's own ttl
    assert again.ttl == 60.0 and again.expires_at >= renewed.expires_at
    store.append(lease, "model")  # the first lease object is still good: same epoch


def write_attempts(store: RunStore, lease: Lease) -> dict[str, Any]:
    return {
        "append": lambda: store.append(lease, "late", {"x": 1}),
        "append_many": lambda: store.append_many(lease, [("late", {}), ("later", {})]),
        "keyed append": lambda: store.append(lease, "decision", {"approved": True}, key="c1"),
        "update_run": lambda: store.update_run(lease, status="finished", meta={"late": True}),
        "renew": lambda: store.renew(lease),
    }


def test_a_holder_that_was_taken_over_writes_nothing(store: RunStore) -> None:
    old = store.start("r1", kind="react", ttl=SHORT, holder="old", meta={"m": 1})
    store.append(old, "model")
    lapse(old)
    new = store.acquire("r1", ttl=30, holder="new")
    for write, attempt in write_attempts(store, old).items():
        with pytest.raises(LeaseLost) as caught:
            attempt()
        assert (caught.value.run_id, caught.value.holder, caught.value.epoch) == ("r1", "old", 1), (
            write
        )
        assert "'new' took the run over (epoch 2)" in str(caught.value), write
    info = store.run_info("r1")
    assert (info.status, info.meta, info.holder, info.epoch, info.last_seq) == (
        "running",
        {"m": 1},
        "new",
        2,
        1,
    )
    assert store.find("r1", kind="decision", key="c1") is None
    assert new.expires_at == info.lease_expires_at


def test_an_expired_lease_writes_nothing_even_if_nobody_took_over(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=SHORT)
    lapse(lease)
    for write, attempt in write_attempts(store, lease).items():
        with pytest.raises(LeaseLost, match="expired at"):
            attempt()
        assert store.read("r1") == [], write
    assert store.run_info("r1").status == "running"


def test_a_released_lease_writes_nothing(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.release(lease)
    for write, attempt in write_attempts(store, lease).items():
        with pytest.raises(LeaseLost, match="released"):
            attempt()
        assert store.read("r1") == [], write


def test_delete_refuses_a_leased_run_unless_forced(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30, holder="busy")
    store.append(lease, "decision", {}, key="c1")
    with pytest.raises(RunLeased) as caught:
        store.delete("r1")
    assert caught.value.holder == "busy"
    assert store.delete("r1", force=True) is True
    with pytest.raises(LeaseLost, match="deleted"):
        store.append(lease, "late")
    with pytest.raises(RunNotFound):
        store.read("r1")
    assert store.list_runs() == []
    again = store.start("r1", kind="react", ttl=30)  # the id is free again, with a fresh journal
    assert store.append(again, "decision", {}, key="c1").seq == 1


def test_delete_of_a_free_run_needs_no_force(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model")
    store.release(lease)
    assert store.delete("r1") is True
    assert store.delete("r1") is False


def test_break_lease_frees_a_held_run_fenced_like_a_take_over(store: RunStore) -> None:
    held = store.start("r1", kind="react", ttl=30, holder="stuck")
    store.append(held, "model")
    assert store.break_lease("r1") is True
    info = store.run_info("r1")
    assert (info.holder, info.lease_expires_at, info.leased, info.epoch) == (None, None, False, 2)
    for write, attempt in write_attempts(store, held).items():
        with pytest.raises(LeaseLost, match=r"its lease was broken, .* \(epoch 2\)"):
            attempt()
        assert len(store.read("r1")) == 1, write
    assert store.release(held) is False
    assert store.acquire("r1", ttl=30, holder="operator").epoch == 3  # at once, no waiting


def test_break_lease_of_a_free_run_changes_nothing(store: RunStore) -> None:
    store.release(store.start("r1", kind="react", ttl=30))
    assert store.break_lease("r1") is False
    assert store.run_info("r1").epoch == 1
    lapsed = store.start("r2", kind="react", ttl=SHORT, holder="gone")
    lapse(lapsed)  # expired, still named as its holder: breaking it bumps the epoch too
    assert store.break_lease("r2") is True and store.run_info("r2").epoch == 2
    with pytest.raises(RunNotFound):
        store.break_lease("nope")
    with pytest.raises(ConfigurationError):
        store.break_lease("")


# --- threads --------------------------------------------------------------------------


def test_threads_appending_under_one_lease_get_gapless_sequence_numbers(store: RunStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    seqs: list[int] = []

    def work(i: int) -> None:
        for j in range(10):
            seqs.append(store.append(lease, "tool_finished", {"t": i, "j": j}).seq)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seqs) == list(range(1, 41))
    assert [r.seq for r in store.read("r1")] == list(range(1, 41))


def test_threads_racing_to_acquire_one_run_have_one_winner(store: RunStore) -> None:
    store.release(store.start("r1", kind="react", ttl=30))
    barrier = threading.Barrier(6)
    won: list[Lease] = []
    refused: list[RunLeased] = []

    def race(i: int) -> None:
        barrier.wait()
        try:
            won.append(store.acquire("r1", ttl=30, holder=f"h{i}"))
        except RunLeased as exc:
            refused.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 5
    assert {e.holder for e in refused} == {won[0].holder}
    assert won[0].epoch == 2


# --- the store's clock ----------------------------------------------------------------


class Clock:
    """A clock a test moves: seconds since the epoch."""

    def __init__(self, offset: float = 0.0):
        self.now = time.time() + offset

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "sqlite"])
def on_a_clock(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """`(first, second, clock)`: two writers of one store whose clock is its writers' (not
    PostgreSQL: its leases are the server's), on one `clock`, which runs an hour ahead
    until the test sets it right. Two `SQLiteStore`s on one file stand for two processes."""
    from agentloops import MemoryStore, SQLiteStore

    clock = Clock(3600)
    if request.param == "memory":
        store = MemoryStore(clock=clock)
        yield store, store, clock
        return
    with (
        SQLiteStore(tmp_path / "runs.db", clock=clock) as first,
        SQLiteStore(tmp_path / "runs.db", clock=clock) as second,
    ):
        yield first, second, clock


def test_a_lease_taken_while_the_clock_ran_an_hour_ahead_lapses_a_ttl_after_it_is_asked_for(
    on_a_clock: Any,
) -> None:
    first, second, clock = on_a_clock
    lease = first.start("r1", kind="react", ttl=30, holder="died")
    clock.now -= 3600  # the clock is set right; the holder died meanwhile
    with pytest.raises(RunLeased) as caught:
        second.acquire("r1", ttl=30)
    assert caught.value.holder == "died"
    assert caught.value.until == datetime.fromtimestamp(clock.now + 30, timezone.utc)
    assert caught.value.until < lease.expires_at - timedelta(minutes=59)  # not an hour
    clock.now += 15
    with pytest.raises(RunLeased) as again:  # the bound counts from the first ask
        second.acquire("r1", ttl=30)
    assert again.value.until == caught.value.until
    clock.now += 16
    assert second.acquire("r1", ttl=30, holder="next").epoch == 2
    with pytest.raises(LeaseLost):
        first.append(lease, "late")


def test_a_live_holder_keeps_its_run_under_the_bound(on_a_clock: Any) -> None:
    first, second, clock = on_a_clock
    lease = first.start("r1", kind="react", ttl=30, holder="alive")
    clock.now -= 3600
    with pytest.raises(RunLeased):
        second.acquire("r1", ttl=30)
    clock.now += 10
    lease = first.renew(lease)  # its keeper renews every ttl / 3
    clock.now += 25
    with pytest.raises(RunLeased) as caught:
        second.acquire("r1", ttl=30)
    assert caught.value.holder == "alive"
    first.append(lease, "model")  # and it still writes
