"""The trade proposal after an approved report: a small ReAct loop guarded by the profile.

`Trader.propose` runs a ReAct loop (the trader role; tools: a price look-up and the
guarded `execute_trade`) on a published report that recommends buying or selling. The
`Guardian` lets a small trade through, pauses the loop for a large one, and refuses one
over the hard limit or outside the profile or the report. A paused proposal is saved
whole (`ReActResult.to_state()`), so `Trader.decide` can resume it in any process: the
first decision wins, the guardian checks the trade again against the profile as it is
then (deny beats a person's allow), and an approved trade runs exactly once.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from agentloops import EventSink, ModelClient, ReActLoop, ReActResult
from market_analyst import tools
from market_analyst.archive import ArchivedReport
from market_analyst.guardian import Approver, Check, Guardian
from market_analyst.prompts import TRADER_SYSTEM, trader_prompt
from market_analyst.store import PUBLISHED, RunStore
from market_analyst.trades import (
    DENIED,
    EXECUTED,
    FAILED,
    NONE,
    REFUSED,
    WAITING,
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

    def __init__(self, model: ModelClient, store: RunStore, *, on_event: EventSink | None = None):
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
        before `(trade, False)`; one proposal per report.

        Raises:
            NotTradable: the report is not published, or recommends holding.
            ValueError: a negative budget.
        """
        if budget_usd is not None and not budget_usd >= 0:
            raise ValueError(f"the budget must be 0 or more USD, got {budget_usd}")
        report = self.report(run_id)
        profile = self.store.profile.get()
        trade, claimed = self.store.trades.claim(
            run_id,
            requested_by=by,
            budget_usd=budget_usd,
            report={"tickers": list(report.tickers), "recommendation": report.recommendation},
            limits={
                "auto_approve_usd": profile.auto_approve_usd,
                "hard_limit_usd": profile.hard_limit_usd,
                "trade_tickers": profile.trade_tickers,
            },
            source=tools.settings.source.name,
        )
        if not claimed:
            return trade, False
        guardian = Guardian(profile, tickers=report.tickers, recommendation=report.recommendation)
        auto = Approver(by="guardian", via=f"within {profile.auto_approve_usd:,.0f} USD, unasked")
        loop = self._loop(guardian, trade["trade_id"], auto)
        try:
            result = loop.run(trader_prompt(report, profile, budget_usd), run_id=trade["trade_id"])
        except Exception as exc:
            self._settle(trade, guardian, None, error=f"{type(exc).__name__}: {exc}")
            raise
        return self._settle(trade, guardian, result), True

    def decide(
        self, trade_id: str, approve: bool, *, by: str, via: str
    ) -> tuple[dict[str, Any], bool]:
        """A person's decision on a waiting trade: `(trade, True)` when it is the first,
        `(trade, False)` (and nothing done) when the trade was decided before.

        Raises:
            UnknownTrade: no such trade.
            NotWaiting: the trade never waited for a person (it went through, was
                refused, or proposed nothing).
        """
        self.store.trades.get(trade_id)  # an unknown id: UnknownTrade names those waiting
        trade, claimed = self.store.trades.claim_decision(trade_id, approve, by=by, via=via)
        if not claimed:
            if trade.get("decision") is None:
                raise NotWaiting(f"trade {trade_id} is {trade['status']}: no decision is waiting")
            return trade, False
        report = trade["report"]
        profile = self.store.profile.get()  # the rules as they are now: deny beats allow
        guardian = Guardian(
            profile, tickers=report["tickers"], recommendation=report["recommendation"]
        )
        guardian.checks = {c["call_id"]: Check(**c) for c in trade.get("calls", [])}
        guardian.closed = True  # the resumed loop may finish, not trade again
        paused = ReActResult.from_state(trade["paused"])
        decisions = {}
        for call in paused.pending_approvals:
            refused = guardian.refusals(call.args) if approve else []
            check = guardian.checks.get(call.id)
            if refused and check is not None:
                check.verdict, check.reasons = "refused", [f"at approval: {r}" for r in refused]
            decisions[call.id] = approve and not refused
        loop = self._loop(guardian, trade_id, Approver(by=by, via=via))
        try:
            result = loop.resume(paused, decisions)
        except Exception as exc:
            self._settle(trade, guardian, None, error=f"{type(exc).__name__}: {exc}")
            raise
        return self._settle(trade, guardian, result), True

    def _loop(self, guardian: Guardian, trade_id: str, approver: Approver) -> ReActLoop:
        return ReActLoop(
            self.model,
            [tools.get_stock_snapshot, guardian.tool(trade_id, approver, self.store.ledger_path)],
            system=TRADER_SYSTEM,
            approval=guardian.policy,
            max_steps=MAX_STEPS,
            on_event=self.on_event,
        )

    def _settle(
        self,
        trade: dict[str, Any],
        guardian: Guardian,
        result: ReActResult | None,
        *,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Save where the proposal stands. The ledger says whether the trade happened."""
        trade_id = trade["trade_id"]
        calls = [asdict(c) for c in guardian.checks.values()]
        entry = tools.ledger_entry(trade_id, self.store.ledger_path)
        fields: dict[str, Any] = {"calls": calls, "ledger_entry": entry, "error": error}
        if result is not None:
            fields["answer"] = result.answer if result.stop_reason == "answered" else ""
        if entry is not None:
            status = EXECUTED
        elif result is not None and result.stop_reason == "approval_required":
            status = WAITING
            fields["paused"] = result.to_state()
            fields["pending"] = [c.call_id for c in guardian.checks.values() if _pending(c, result)]
        elif error is not None or result is None or result.stop_reason != "answered":
            status = FAILED
            fields["error"] = error or (result.detail if result is not None else "no result")
        elif trade.get("decision") is not None and not trade["decision"]["approved"]:
            status = DENIED
        elif any(c["verdict"] == "refused" for c in calls):
            status = REFUSED
        else:
            status = NONE
        if status != WAITING:
            fields["paused"] = None
        return self.store.trades.update(trade_id, status=status, **fields)


def _pending(check: Check, result: ReActResult) -> bool:
    return any(c.id == check.call_id for c in result.pending_approvals)


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
