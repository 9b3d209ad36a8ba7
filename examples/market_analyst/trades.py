"""Trade proposals: one journal per proposal on the run store, each proposal and decision
taken once.

A published report that recommends buying or selling may lead to one proposal (one trade
at most), `tr-...` after the report's `ma-...`. Its journal (kind "market_analyst_trade")
holds "proposed" (who asked, the budget, the report, the limits, the trader's task), a
"check" for each trade call the guardian judged (written before the call may run), the
person's "decision" (a keyed record: the first one wins), "retried", and "settled" (where
the proposal stands). The trader's ReAct loop journals its own run, `TRADE_ID/trader`.

A proposal moves proposing -> executed | waiting | refused | none | failed; a waiting one
is decided once and moves to applying, then executed | denied | refused. Whoever works on
a proposal holds its lease; a proposal whose process died stays proposing (or applying)
only until the next attempt takes it over and finishes it from the journals.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from agentloops import RunNotFound, SQLiteStore
from agentloops.journal import JournalRecord, Lease, RunInfo
from market_analyst import journal

PROPOSING, WAITING, APPLYING = "proposing", "waiting", "applying"
EXECUTED, REFUSED, DENIED, NONE, FAILED = "executed", "refused", "denied", "none", "failed"
OPEN = (PROPOSING, WAITING, APPLYING)
KIND = "market_analyst_trade"
"""The kind of the proposals' journals in the run store."""


class UnknownTrade(LookupError):
    """No trade with this id; the message lists the trades waiting for a decision."""

    def __init__(self, trade_id: str, waiting: list[str]):
        listed = ", ".join(waiting) if waiting else "none"
        super().__init__(f"no trade with id {trade_id!r}. Trades waiting for a decision: {listed}")


def trade_id_for(run_id: str) -> str:
    """The id of the trade a run's report may lead to: "ma-1a2b3c4d" -> "tr-1a2b3c4d"."""
    return "tr-" + run_id.removeprefix("ma-")


def trader_run(trade_id: str) -> str:
    """The id of a proposal's ReAct loop in the store."""
    return f"{trade_id}/trader"


class Trades:
    """The proposals' journals in `runs`; `lease_ttl` and `label` as for the runs."""

    def __init__(self, runs: SQLiteStore, *, lease_ttl: float, label: str):
        self.runs, self.lease_ttl, self.label = runs, lease_ttl, label

    def get(self, trade_id: str) -> dict[str, Any]:
        """The proposal; raises `UnknownTrade` (listing waiting trades) for an unknown id."""
        info = self._info(trade_id)
        if info is None:
            waiting = self.runs.list_runs(kind=KIND, status=WAITING)
            raise UnknownTrade(trade_id, [i.run_id for i in waiting])
        return self._trade(info)

    def for_run(self, run_id: str) -> dict[str, Any] | None:
        """The proposal made after `run_id`'s report, if any."""
        info = self._info(trade_id_for(run_id))
        return None if info is None else self._trade(info)

    def _info(self, trade_id: str) -> RunInfo | None:
        try:
            info = self.runs.run_info(trade_id)
        except RunNotFound:
            return None
        return info if info.kind == KIND else None

    def list(self, *statuses: str) -> list[dict[str, Any]]:
        """Proposals with one of `statuses` (all when none given), newest first."""
        found = [i for i in self.runs.list_runs(kind=KIND) if not statuses or i.status in statuses]
        found.sort(key=lambda i: (i.updated_at, i.run_id), reverse=True)
        return [self._trade(info) for info in found]

    def _trade(self, info: RunInfo) -> dict[str, Any]:
        trade = fold(info.run_id, self.runs.read(info.run_id))
        trade["lease"] = (
            {"holder": str(info.holder), "until": info.lease_expires_at.isoformat()}
            if info.leased and info.lease_expires_at is not None
            else None
        )
        return trade

    def start(self, trade_id: str, proposed: Mapping[str, Any]) -> Lease:
        """Create a proposal's journal, held by this process: the lease for `held`.

        Raises:
            RunExists: the report led to a proposal before.
        """
        lease = self.runs.start(
            trade_id,
            kind=KIND,
            ttl=self.lease_ttl,
            holder=journal.holder_id(self.label),
            meta={"run_id": proposed["run_id"]},
            status=PROPOSING,
        )
        try:
            self.runs.append(lease, "proposed", proposed)
        except BaseException:
            self.runs.release(lease)
            raise
        return lease

    def held(self, lease: Lease) -> AbstractContextManager[journal.Held]:
        """The proposal `lease` holds, while the block runs; released after."""
        return journal.hold(self.runs, lease, fold)

    @contextmanager
    def hold(self, trade_id: str) -> Iterator[journal.Held]:
        """An existing proposal, held while the block runs.

        Raises:
            RunLeased: another process works on it now.
            UnknownTrade: there is no such proposal.
        """
        self.get(trade_id)  # UnknownTrade names those waiting
        lease = self.runs.acquire(
            trade_id, ttl=self.lease_ttl, holder=journal.holder_id(self.label)
        )
        with journal.hold(self.runs, lease, fold) as held:
            yield held


def fold(trade_id: str, records: Sequence[JournalRecord]) -> dict[str, Any]:
    """A proposal from its journal. `checks` holds the guardian's last check per call id
    (what a resumed loop is judged by again); `calls` those of the last settled drive."""
    trade: dict[str, Any] = {
        "trade_id": trade_id,
        "status": PROPOSING,
        "calls": [],
        "checks": {},
        "retried": 0,
        "decision": None,
        "error": None,
    }
    for r in records:
        if r.kind == "proposed":
            trade.update(r.data)
        elif r.kind == "check":
            trade["checks"][r.data["call_id"]] = r.data
        elif r.kind == "settled":
            trade.update(r.data)
        elif r.kind == "retried":
            trade.update(status=PROPOSING, error=None, retried=trade["retried"] + 1)
        elif r.kind == "decision":
            trade.update(decision=r.data, status=APPLYING)
    return trade
