"""The trade proposal after an approved report: a small durable ReAct loop guarded by the
profile.

`Trader.propose` runs a ReAct loop (the trader role; tools: a price look-up and the
guarded `execute_trade`) on a published report that recommends buying or selling, journaled
on the run store as `TRADE_ID/trader`. The `Guardian` lets a small trade through, pauses
the loop for a large one, and refuses one over the hard limit or outside the profile or
the report. A paused proposal waits in the journal: `Trader.decide` records the person's
decision once (the first wins), the guardian checks the trade again against the profile
as it is then (deny beats a person's allow), and `ReActLoop.resume(run_id, {call_id: ...})`
replays the loop and runs an approved trade exactly once, in any process.

Everything happens under the proposal's lease. A proposal whose process died part-way
(proposing, or applying a decision) is finished by the next attempt to propose or decide
it: the loop is resumed from its journal, so no model or tool call on record runs again,
and the ledger holds one line per trade id whatever happens.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from agentloops import EventSink, ModelClient, ReActLoop, ReActResult, RunExists, StoreError
from market_analyst import journal, tools
from market_analyst.archive import ArchivedReport
from market_analyst.guardian import Approver, Check, Guardian
from market_analyst.prompts import TRADER_SYSTEM, trader_prompt
from market_analyst.store import PUBLISHED, AnalystStore, now
from market_analyst.trades import (
    APPLYING,
    DENIED,
    EXECUTED,
    FAILED,
    NONE,
    PROPOSING,
    REFUSED,
    WAITING,
    trade_id_for,
    trader_run,
)

MAX_STEPS = 6
TRADABLE = ("buy", "sell")


class NotTradable(ValueError):
    """The run has no published report that recommends buying or selling."""


class NotWaiting(ValueError):
    """A decision on a trade that is not waiting for one (and never was decided)."""


class Trader:
    """Proposes and settles the trade an approved report may lead to.

    Args:
        model: plays the trader (the command line's and the web app's main client).
        store: the runs, the archive, the profile, the trades and the ledger.
        on_event: receives the loop's events (the live view).
    """

    def __init__(
        self, model: ModelClient, store: AnalystStore, *, on_event: EventSink | None = None
    ):
        self.model, self.store, self.on_event = model, store, on_event

    def report(self, run_id: str) -> ArchivedReport:
        """The run's published report, if it recommends a trade; else `NotTradable`."""
        record = self.store.get(run_id)
        report = self.store.archive.get(run_id)
        if record["status"] != PUBLISHED or report is None:
            raise NotTradable(
                f"run {run_id} is {record['status']}: only a published report can lead to a trade"
            )
        if report.recommendation not in TRADABLE:
            raise NotTradable(
                f"report {run_id} recommends {report.recommendation}: there is nothing to trade"
            )
        return report

    def propose(
        self, run_id: str, *, by: str, budget_usd: float | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Propose the trade for `run_id`'s report: `(trade, True)`, or the proposal made
        before `(trade, False)`; one proposal per report. A proposal that failed, or whose
        process died, is continued from its journal (`(trade, True)`).

        Raises:
            NotTradable: the report is not published, or recommends holding.
            ValueError: a negative budget.
            RunLeased: another process works on this report's proposal now.
        """
        if budget_usd is not None and not budget_usd >= 0:
            raise ValueError(f"the budget must be 0 or more USD, got {budget_usd}")
        report = self.report(run_id)
        profile = self.store.profile.get()
        proposed = {
            "run_id": run_id,
            "created": now(),
            "requested_by": by,
            "budget_usd": budget_usd,
            "report": {"tickers": list(report.tickers), "recommendation": report.recommendation},
            "limits": {
                "auto_approve_usd": profile.auto_approve_usd,
                "hard_limit_usd": profile.hard_limit_usd,
                "trade_tickers": profile.trade_tickers,
            },
            "source": tools.settings.source.name,
            "task": trader_prompt(report, profile, budget_usd),
        }
        trades, trade_id = self.store.trades, trade_id_for(run_id)
        try:
            lease = trades.start(trade_id, proposed)
        except RunExists:
            pass  # proposed before: see below
        else:
            with trades.held(lease) as held:
                return self._propose(held), True
        with trades.hold(trade_id) as held:
            status = held.record["status"]
            if status == FAILED:  # a provider error, say: continue where it stopped
                held.add("retried", {"by": by, "at": now()}, status=PROPOSING)
            elif status != PROPOSING:
                return self._finish(held), False
            return self._propose(held), True  # a failed one, or one whose process died

    def decide(
        self, trade_id: str, approve: bool, *, by: str, via: str
    ) -> tuple[dict[str, Any], bool]:
        """A person's decision on a waiting trade: `(trade, True)` when it is the first,
        `(trade, False)` (and nothing done) when the trade was decided before.

        Raises:
            UnknownTrade: no such trade.
            NotWaiting: the trade never waited for a person (it went through, was
                refused, or proposed nothing).
            RunLeased: another process works on this trade now.
        """
        with self.store.trades.hold(trade_id) as held:
            trade = self._finish(held)  # a proposal or a decision a dead process left
            if trade.get("decision") is not None:
                return trade, False
            if trade["status"] != WAITING:
                raise NotWaiting(f"trade {trade_id} is {trade['status']}: no decision is waiting")
            current = self._guardian(trade)  # the rules as they are now: deny beats allow
            calls: dict[str, bool] = {}
            refusals: dict[str, list[str]] = {}
            for call_id in trade["pending"]:
                args = trade["checks"][call_id]
                refused = current.refusals(_trade_args(args)) if approve else []
                calls[call_id] = approve and not refused
                if refused:
                    refusals[call_id] = [f"at approval: {r}" for r in refused]
            decision = {"approved": approve, "by": by, "via": via, "at": now()}
            decision.update(calls=calls, refusals=refusals)
            held.add("decision", decision, key="person", status=APPLYING)
            return self._apply(held), True

    def _finish(self, held: journal.Held) -> dict[str, Any]:
        """Finish what a process that died left: a proposal, or a decision not applied."""
        status = held.record["status"]
        if status == PROPOSING:
            return self._propose(held)
        if status == APPLYING:
            return self._apply(held)
        return held.record

    def _propose(self, held: journal.Held) -> dict[str, Any]:
        trade = held.record
        guardian = self._guardian(trade, held)
        auto = Approver(
            by="guardian", via=f"within {trade['limits']['auto_approve_usd']:,.0f} USD, unasked"
        )
        return self._drive(held, guardian, auto, None)

    def _apply(self, held: journal.Held) -> dict[str, Any]:
        trade = held.record
        decision = trade["decision"]
        guardian = self._guardian(trade, held)
        guardian.closed = True  # the resumed loop may finish, not trade again
        return self._drive(
            held, guardian, Approver(by=decision["by"], via=decision["via"]), decision["calls"]
        )

    def _guardian(self, trade: dict[str, Any], held: journal.Held | None = None) -> Guardian:
        report = trade["report"]
        known = {cid: Check(**c) for cid, c in trade["checks"].items()}

        def journal_check(check: Check) -> None:
            assert held is not None
            held.add("check", asdict(check))

        return Guardian(
            self.store.profile.get(),
            tickers=report["tickers"],
            recommendation=report["recommendation"],
            known=known if held is not None else None,
            on_check=journal_check if held is not None else None,
        )

    def _drive(
        self,
        held: journal.Held,
        guardian: Guardian,
        approver: Approver,
        decisions: dict[str, bool] | None,
    ) -> dict[str, Any]:
        """Run or resume the proposal's loop, then record where the proposal stands."""
        trade_id = held.run_id
        loop = ReActLoop(
            self.model,
            [tools.get_stock_snapshot, guardian.tool(trade_id, approver, self.store.ledger_path)],
            system=TRADER_SYSTEM,
            approval=guardian.policy,
            max_steps=MAX_STEPS,
            on_event=self.on_event,
            store=self.store.runs,
            lease_ttl=self.store.lease_ttl,
        )
        task, loop_id = held.record["task"], trader_run(trade_id)
        try:
            result = journal.drive(
                loop,
                self.store.runs,
                task,
                loop_id,
                decisions,
                ttl=self.store.lease_ttl,
                parent=trade_id,
            )
        except StoreError:
            raise  # the store's trouble (a lease lost), not the proposal's: left as it was
        except Exception as exc:
            self._settle(held, guardian, None, error=f"{type(exc).__name__}: {exc}")
            raise
        return self._settle(held, guardian, result)

    def _settle(
        self,
        held: journal.Held,
        guardian: Guardian,
        result: ReActResult | None,
        *,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Record where the proposal stands. The ledger says whether the trade happened."""
        trade = held.record
        decision = trade.get("decision") or {}
        calls = [asdict(c) for c in guardian.checks.values()]
        for c in calls:  # what the guardian refused when the person approved
            reasons = decision.get("refusals", {}).get(c["call_id"])
            if reasons:
                c.update(verdict="refused", reasons=reasons)
        entry = tools.ledger_entry(held.run_id, self.store.ledger_path)
        fields: dict[str, Any] = {
            "calls": calls,
            "ledger_entry": entry,
            "error": error,
            "pending": [],
        }
        if result is not None:
            fields["answer"] = result.answer if result.stop_reason == "answered" else ""
        if entry is not None:
            status = EXECUTED
        elif result is not None and result.stop_reason == "approval_required":
            status = WAITING
            fields["pending"] = [c.id for c in result.pending_approvals]
        elif error is not None or result is None or result.stop_reason != "answered":
            status = FAILED
            fields["error"] = error or (result.detail if result is not None else "no result")
        elif decision and not decision["approved"]:
            status = DENIED
        elif any(c["verdict"] == "refused" for c in calls):
            status = REFUSED
        else:
            status = NONE
        return held.add("settled", {"status": status, **fields}, status=status)


def _trade_args(check: dict[str, Any]) -> dict[str, Any]:
    return {"ticker": check["ticker"], "side": check["side"], "quantity": check["quantity"]}


VERDICTS = {"auto": "within the limit, unasked", "ask": "asks a person", "refused": "refused"}


def describe(trade: dict[str, Any]) -> str:
    """ "buy 28 GOOGL at 176.23 USD = 4,934.44 USD (asks a person)", or "none proposed"."""
    calls = trade.get("calls") or []
    if not calls:
        return "none proposed"
    c = calls[-1]
    value = f"{c['value_usd']:,.2f} USD" if c.get("value_usd") is not None else "no price"
    verdict = VERDICTS.get(c["verdict"], c["verdict"])
    return f"{c['side']} {c['quantity']} {c['ticker']} at {c['price']} USD = {value} ({verdict})"
