"""LeaseKeeper: renews while work goes on, and notices a lost lease (sync and asyncio)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from agentloops import ConfigurationError, Lease, LeaseKeeper, LeaseLost, MemoryStore, StoreError


class Clock:
    """A clock a test moves by hand: leases expire without sleeping."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_keeps_the_lease_past_its_ttl_while_work_goes_on() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=0.3)
    with LeaseKeeper(store, lease, interval=0.05) as keeper:
        time.sleep(0.7)
        keeper.check()
        store.append(lease, "model")  # still current: the same epoch, renewed
        assert keeper.lease.epoch == lease.epoch
        assert keeper.lease.expires_at > lease.expires_at
    assert keeper.lost is None
    assert store.run_info("r1").leased


class Gated:
    """Renewals wait while the test holds `gate`: a take-over cannot race a renewal."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self.gate = threading.Lock()

    def renew(self, lease: Lease, *, ttl: float | None = None) -> Lease:
        with self.gate:
            return self.store.renew(lease, ttl=ttl)


def test_notices_a_take_over_and_says_so_once() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    gated = Gated(store)
    lease = store.start("r1", kind="react", ttl=30, holder="a")
    told: list[LeaseLost] = []
    with LeaseKeeper(gated, lease, interval=0.02, on_lost=told.append) as keeper:  # type: ignore[arg-type]
        with gated.gate:
            clock.now += 31  # no renewal for "31 s": the lease lapsed, and "b" takes over
            store.acquire("r1", ttl=30, holder="b")
        wait_for(lambda: keeper.lost is not None)
        with pytest.raises(LeaseLost, match="'b' took the run over"):
            keeper.check()
        time.sleep(0.1)  # no second report
    assert told == [keeper.lost]
    assert not keeper._thread.is_alive()  # type: ignore[union-attr]


def test_the_callback_may_stop_the_keeper_from_its_own_thread() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    lease = store.start("r1", kind="react", ttl=30)
    keeper = LeaseKeeper(store, lease, interval=0.02, on_lost=lambda exc: keeper.stop())
    keeper.start()
    store.delete("r1", force=True)
    wait_for(lambda: keeper.lost is not None)
    keeper.stop()
    assert "deleted" in str(keeper.lost)


class FlakyStore:
    """Renewal fails with a `StoreError` (the database is unreachable) `failures` times."""

    def __init__(self, store: MemoryStore, failures: float):
        self.store = store
        self.failures = failures
        self.calls = 0

    def renew(self, lease: Lease, *, ttl: float | None = None) -> Lease:
        self.calls += 1
        if self.calls <= self.failures:
            raise StoreError("could not connect to server", run_id=lease.run_id)
        return self.store.renew(lease, ttl=ttl)


def test_a_brief_outage_is_retried() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=1.0)
    flaky = FlakyStore(store, failures=2)
    with LeaseKeeper(flaky, lease, interval=0.05) as keeper:  # type: ignore[arg-type]
        wait_for(lambda: flaky.calls >= 4)
        keeper.check()
    assert keeper.lost is None and keeper.lease.expires_at > lease.expires_at


def test_an_outage_longer_than_the_ttl_counts_as_lost() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=0.3)
    flaky = FlakyStore(store, failures=float("inf"))
    with LeaseKeeper(flaky, lease, interval=0.05) as keeper:  # type: ignore[arg-type]
        wait_for(lambda: keeper.lost is not None)
    assert "may have expired" in str(keeper.lost) and "could not connect" in str(keeper.lost)
    assert isinstance(keeper.lost.__cause__, StoreError)  # type: ignore[union-attr]
    assert flaky.calls >= 3


def test_check_counts_a_lease_not_renewed_for_its_ttl_as_lost() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=0.1)
    keeper = LeaseKeeper(store, lease)  # never started: a suspended process looks like this
    keeper.check()
    time.sleep(0.15)
    with pytest.raises(LeaseLost, match=r"not renewed for 0\.1s"):
        keeper.check()


@pytest.mark.anyio
async def test_async_with_renews_while_the_loop_awaits() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=0.3)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    async with LeaseKeeper(store, lease, interval=0.05) as keeper:
        await asyncio.sleep(0.6)
        keeper.check()
    ticker.cancel()
    assert ticks > 20  # the event loop ran throughout
    store.append(lease, "model")
    assert keeper.lost is None and not keeper._thread.is_alive()  # type: ignore[union-attr]


@pytest.mark.parametrize("interval", [0, -1, 30, 31])
def test_interval_must_be_shorter_than_the_ttl(interval: float) -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=30)
    with pytest.raises(ConfigurationError, match="interval"):
        LeaseKeeper(store, lease, interval=interval)


def test_a_keeper_starts_once() -> None:
    store = MemoryStore()
    keeper = LeaseKeeper(store, store.start("r1", kind="react", ttl=30)).start()
    with pytest.raises(ConfigurationError, match="started already"):
        keeper.start()
    keeper.stop()


def test_default_interval_is_a_third_of_the_ttl() -> None:
    store = MemoryStore()
    lease = store.start("r1", kind="react", ttl=30)
    assert LeaseKeeper(store, lease).interval == 10
    assert LeaseKeeper(store, replace(lease, ttl=3)).interval == 1


def test_renewals_run_on_their_own_thread() -> None:
    store = MemoryStore()
    seen: set[str] = set()

    class Recording:
        def renew(self, lease: Lease, *, ttl: float | None = None) -> Lease:
            seen.add(threading.current_thread().name)
            return store.renew(lease, ttl=ttl)

    lease = store.start("r1", kind="react", ttl=0.3)
    with LeaseKeeper(Recording(), lease, interval=0.05):  # type: ignore[arg-type]
        wait_for(lambda: bool(seen))
    assert seen == {"lease-keeper r1"}


def test_an_attached_keeper_is_renewed_by_its_parents_thread_until_detached() -> None:
    store = MemoryStore()
    top = store.start("top", kind="react", ttl=0.3)
    below = store.start("top:c1", kind="react", ttl=0.3, holder=top.holder)
    sub = LeaseKeeper(store, below, interval=0.05)
    with LeaseKeeper(store, top, interval=0.05) as keeper:
        keeper.attach(sub)
        time.sleep(0.7)
        sub.check()  # renewed all along, by the parent's thread: no thread of its own
        store.append(below, "model")
        assert sub.lease.expires_at > below.expires_at and sub._thread is None
        keeper.detach(sub)
        keeper.detach(sub)  # a second time: nothing to do
        renewed = sub.lease.expires_at
        time.sleep(0.2)
        assert sub.lease.expires_at == renewed
    assert keeper.lost is None and sub.lost is None


def test_an_attached_keeper_that_loses_its_lease_stops_being_renewed() -> None:
    store = MemoryStore()
    top = store.start("top", kind="react", ttl=5)
    below = store.start("top:c1", kind="react", ttl=5)
    sub = LeaseKeeper(store, below, interval=1)
    with LeaseKeeper(store, top, interval=0.05) as keeper:
        keeper.attach(sub)
        store.delete("top:c1", force=True)
        wait_for(lambda: sub.lost is not None)
        with pytest.raises(LeaseLost):
            sub.check()
        keeper.check()  # its own lease is kept
