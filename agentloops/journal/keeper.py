"""`LeaseKeeper`: renews a lease in a background thread while a run's work goes on.

Renewal is what keeps a long model or tool call from losing the run; noticing a failed
renewal is what lets the driver stop before it does work it can no longer record.
Fencing does not depend on the keeper: a write under a lost lease fails anyway.

The durable runs' keepers share one thread per store and process (`_Renewals`): it renews
every lease they hold in one batched write per interval (the store's `_renew_many`), so a
thousand runs cost one thread and a few writes a second, not a thousand of each.

Rule: it knows a `RunStore` and its `Lease`, and no driver or loop.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import ClassVar

from agentloops import _pool
from agentloops.errors import ConfigurationError, LeaseLost, StoreError
from agentloops.journal.records import Lease, RunStore


class LeaseKeeper:
    """Renews `lease` every `interval` seconds in a daemon thread until stopped.

    A renewal that raises `LeaseLost` (the lease expired, the run was taken over or
    deleted) stops the keeper: `lost` holds the error, `check()` raises it, and
    `on_lost` is called with it from the keeper's thread. A renewal that fails for
    another reason (the database is briefly unreachable) is retried each interval until
    `lease.ttl` seconds have passed since the last renewal that succeeded, measured on
    this machine's monotonic clock from when that renewal was sent: from then on the
    lease may have expired, so the keeper counts it as lost.

    Use it with `with` in sync code, and `async with` in asyncio code (the thread still
    does the renewing; entering and leaving never block the event loop):

        lease = store.acquire(run_id, ttl=30)
        with LeaseKeeper(store, lease) as keeper:
            for effect in work:
                keeper.check()          # stop before starting what cannot be recorded
                store.append(lease, ...)
        store.release(lease)

    A keeper can also keep other keepers' leases in its own thread (`attach`): a run's
    keeper renews the leases of its sub-runs, so a sub-run costs no thread of its own and
    its lease lapses with its parent's.

    Args:
        store: the store that issued the lease.
        lease: the lease to keep.
        interval: seconds between renewals; default a third of `lease.ttl`.
        on_lost: called once, from the keeper's thread, when the lease is lost.
    """

    def __init__(
        self,
        store: RunStore,
        lease: Lease,
        *,
        interval: float | None = None,
        on_lost: Callable[[LeaseLost], object] | None = None,
    ):
        interval = lease.ttl / 3 if interval is None else interval
        if not 0 < interval < lease.ttl:
            raise ConfigurationError(
                f"interval must be > 0 and < the lease's ttl {lease.ttl}, got {interval}"
            )
        self.store = store
        self.interval = interval
        self.on_lost = on_lost
        self._lease = lease
        self._lost: LeaseLost | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._attached: list[LeaseKeeper] = []
        self._lock = threading.Lock()
        self._shared: _Renewals | None = None
        # When the lease was last known good: build the keeper right after acquiring it.
        self._renewed_at = time.monotonic()

    @property
    def lease(self) -> Lease:
        """The lease as last renewed (the same epoch as the one given; a later expiry)."""
        return self._lease

    @property
    def lost(self) -> LeaseLost | None:
        """Why the lease was lost, or `None` while it is kept."""
        return self._lost

    def check(self) -> None:
        """Raise `LeaseLost` if the keeper found the lease lost, or if no renewal has
        succeeded for `lease.ttl` seconds (the process was suspended, the thread starved):
        the lease may have expired even though the keeper has not yet been told so."""
        if self._lost is None and time.monotonic() - self._renewed_at >= self._lease.ttl:
            self._lost = self._expired(None)
            self._stop.set()  # lost is lost: a late renewal must not make it look kept
        if self._lost is not None:
            raise self._lost

    def start(self) -> LeaseKeeper:
        """Start renewing in a daemon thread."""
        if self._thread is not None:
            raise ConfigurationError("this LeaseKeeper was started already")
        self._thread = threading.Thread(
            target=self._run, name=f"lease-keeper {self._lease.run_id}", daemon=True
        )
        self._thread.start()
        return self

    def _start_shared(self) -> LeaseKeeper:
        """Start renewing from the one thread this process keeps for the store's leases
        (with theirs, in one batched write per interval), not a thread of its own."""
        if self._thread is not None or self._shared is not None:
            raise ConfigurationError("this LeaseKeeper was started already")
        self._shared = _Renewals.of(self.store)
        self._shared.add(self)
        return self

    def stop(self) -> None:
        """Stop renewing and wait for the thread (at most one renewal in flight)."""
        self._stop.set()
        if self._shared is not None:
            self._shared.remove(self)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def attach(self, other: LeaseKeeper) -> None:
        """Renew `other`'s lease too, after this one's, from this keeper's thread (which
        `other` then never starts): a sub-run's lease, kept by its run's keeper."""
        other._renewed_at = time.monotonic()
        with self._lock:
            self._attached.append(other)

    def detach(self, other: LeaseKeeper) -> None:
        """Stop renewing `other`'s lease (a renewal of it in flight finishes first)."""
        with self._lock:
            if other in self._attached:
                self._attached.remove(other)

    def _attached_now(self) -> list[LeaseKeeper]:
        with self._lock:
            return list(self._attached)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self._renew():
                return
            for other in self._attached_now():
                if other._lost is None:
                    other._renew()

    def _renew(self) -> bool:
        """Renew once; False when the lease is lost (the keeper stops keeping it)."""
        sent = time.monotonic()
        try:
            renewed: Lease | LeaseLost | StoreError = self.store.renew(self._lease)
        except (LeaseLost, StoreError) as exc:
            renewed = exc
        return self._renewed(renewed, sent)

    def _renewed(self, outcome: Lease | LeaseLost | StoreError, sent: float) -> bool:
        """Take a renewal's outcome (the renewed lease, or why not), sent at `sent`."""
        if isinstance(outcome, LeaseLost):
            self._give_up(outcome)
            return False
        if isinstance(outcome, StoreError):
            if time.monotonic() - self._renewed_at < self._lease.ttl:
                return True  # transient: the lease is still ours for a while; try again
            self._give_up(self._expired(outcome))
            return False
        self._lease = outcome
        self._renewed_at = sent
        return True

    def _expired(self, cause: StoreError | None) -> LeaseLost:
        lease = self._lease
        lost = LeaseLost(
            f"run {lease.run_id!r}: the lease of {lease.holder!r} (epoch {lease.epoch}) was not "
            f"renewed for {lease.ttl}s and may have expired"
            + ("" if cause is None else f": {cause}"),
            run_id=lease.run_id,
            holder=lease.holder,
            epoch=lease.epoch,
        )
        lost.__cause__ = cause
        return lost

    def _give_up(self, lost: LeaseLost) -> None:
        self._lost = lost
        if self.on_lost is not None:
            self.on_lost(lost)

    def __enter__(self) -> LeaseKeeper:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LeaseKeeper:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        # joining waits for a renewal in flight: not on the loop (nor its default executor)
        await _pool.call(self.stop, pool=_pool.own)


class _Renewals:
    """The shared keepers of one store in this process, renewed by one daemon thread: when
    the first is due, every one due within half its interval is renewed in one batched
    write (`_renew_many`; a lease at a time for a store without it), then the keepers
    attached to them (sub-runs) in a second one, as a keeper's own thread does. The thread
    ends when no keeper is left, and starts again with the next."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _all: ClassVar[dict[int, _Renewals]] = {}
    """By `id(store)`; a store's entry goes with its last keeper (no store is kept alive)."""

    def __init__(self, store: RunStore):
        self.store = store
        self.cond = threading.Condition(threading.Lock())
        self.due: dict[LeaseKeeper, float] = {}
        """Each keeper, and when it is next due (monotonic)."""
        self.busy: set[LeaseKeeper] = set()
        """The keepers whose renewal is in flight."""
        self.running = False
        self.thread: threading.Thread | None = None
        self.wake_at = 0.0
        """When the thread wakes next, unless told sooner (a keeper due before then)."""

    @classmethod
    def of(cls, store: RunStore) -> _Renewals:
        with cls._lock:
            renewals = cls._all.get(id(store))
            if renewals is None or renewals.store is not store:
                renewals = cls._all[id(store)] = cls(store)
            return renewals

    def add(self, keeper: LeaseKeeper) -> None:
        with _Renewals._lock, self.cond:  # the store's entry cannot go meanwhile
            _Renewals._all[id(self.store)] = self
            due = self.due[keeper] = time.monotonic() + keeper.interval
            if self.running:
                if due < self.wake_at:  # (a thousand runs starting wake it not once each)
                    self.cond.notify()
                return
            self.running = True
            self.thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        try:
            self.thread.start()
        except BaseException:
            with self.cond:
                self.running = False
            raise

    def remove(self, keeper: LeaseKeeper) -> None:
        """Renew `keeper` no more (waiting for a renewal of it in flight)."""
        with self.cond:
            self.due.pop(keeper, None)
            if not self.due:
                self.cond.notify_all()  # the last one gone: the thread ends now, not when due
            while keeper in self.busy and threading.current_thread() is not self.thread:
                self.cond.wait()

    def _next(self) -> list[LeaseKeeper] | None:
        """Wait for the next keepers due; `None` when none is left (the thread ends)."""
        while True:
            with self.cond:
                while self.due:
                    now = time.monotonic()
                    first = min(self.due.values())
                    if first <= now:
                        batch = [k for k, at in self.due.items() if at - k.interval / 2 <= now]
                        self.busy.update(batch)
                        return batch
                    self.wake_at = first
                    self.cond.wait(first - now)
            with _Renewals._lock, self.cond:  # none left: go, unless one came meanwhile
                if not self.due:
                    self.running = False
                    if _Renewals._all.get(id(self.store)) is self:
                        del _Renewals._all[id(self.store)]
                    return None

    def _run(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            try:
                self._renew(batch)
                attached = [
                    other
                    for keeper in batch
                    if keeper._lost is None
                    for other in keeper._attached_now()
                    if other._lost is None
                ]
                if attached:
                    self._renew(attached)
            finally:
                with self.cond:
                    self.busy.difference_update(batch)
                    now = time.monotonic()
                    for keeper in batch:
                        if keeper in self.due:
                            if keeper._lost is None:
                                self.due[keeper] = now + keeper.interval
                            else:
                                del self.due[keeper]
                    self.cond.notify_all()

    def _renew(self, keepers: list[LeaseKeeper]) -> None:
        batches = getattr(self.store, "_renews_in_batches", False)
        many = self.store._renew_many if batches else None  # type: ignore[attr-defined]
        if many is None:  # a store of the user's (or a `renew` of its own): one at a time
            for keeper in keepers:
                keeper._renew()
            return
        sent = time.monotonic()
        outcomes: list[Lease | LeaseLost | StoreError]
        try:
            outcomes = many([keeper._lease for keeper in keepers])
        except StoreError as exc:  # the whole write failed (the database is unreachable)
            outcomes = [exc] * len(keepers)
        for keeper, outcome in zip(keepers, outcomes, strict=True):
            keeper._renewed(outcome, sent)


def _forget_renewals() -> None:
    """In a forked child: none of the parent's threads runs, and none of its leases is ours."""
    _Renewals._lock = threading.Lock()
    _Renewals._all = {}


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forget_renewals)
