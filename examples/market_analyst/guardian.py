"""The trade guardian: which proposed trades go through, which wait for a person, and
which are refused, from the investor's profile and the approved report.

It is the library's two approval hooks, which combine so that deny beats allow:

- `execute_trade`'s `requires_approval` is a predicate on the call's arguments
  (`Guardian.asks`): a trade worth more than the profile's `auto_approve_usd` waits for
  a person. A predicate can only add asking; one that cannot answer asks.
- The loop's approval policy (`Guardian.policy`) denies a trade worth more than
  `hard_limit_usd`, or outside the profile (a ticker it does not allow, selling more
  than is held) or outside the approved report (another ticker, the other side), and a
  second trade in one proposal. A denied call never runs, whatever anyone answers.

A proposal's loop is durable: resumed, it is replayed from its journal, and the guardian
must judge each call it saw before as it did then (whatever the profile or the price
now), or the replay would go another way. The checks it made are journaled as it makes
them (`on_check`), and a guardian given them back (`known`) answers from them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pydantic

from agentloops import Tool, ToolCall, idempotency_key
from market_analyst import tools
from market_analyst.memory import Profile

TRADE_TOOL = "execute_trade"

Verdict = Literal["auto", "ask", "refused"]


@dataclass(frozen=True, kw_only=True)
class Approver:
    """Who lets the trades of one loop run through, as the ledger records it."""

    by: str
    via: str


@dataclass(kw_only=True)
class Check:
    """The guardian's view of one proposed trade call."""

    call_id: str
    ticker: str
    side: str
    quantity: int
    price: float | None
    value_usd: float | None
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    """Why it was refused (empty unless `verdict == "refused"`)."""


class Guardian:
    """The rules for trades proposed after one approved report.

    Args:
        profile: the investor's profile (limits, tradable tickers, holdings).
        tickers: the tickers the approved report covers.
        recommendation: the report's recommendation; only that side may be traded.
    """

    def __init__(
        self,
        profile: Profile,
        *,
        tickers: Sequence[str],
        recommendation: str,
        known: Mapping[str, Check] | None = None,
        on_check: Callable[[Check], None] | None = None,
    ):
        self.profile = profile
        self.tickers = [t.upper() for t in tickers]
        self.recommendation = recommendation
        self.known = dict(known or {})
        """Checks made earlier in this proposal, by call id: the same call (same arguments)
        gets the same verdict again."""
        self.on_check = on_check
        """Told of each new check before the call may run (the trader journals it)."""
        self.checks: dict[str, Check] = {}
        """Every trade call the policy saw, by call id."""
        self.closed = False
        """Set once a proposal's trade is decided: any further trade call is refused."""
        self._pinned: dict[str, bool] = {}

    def refusals(self, args: Mapping[str, Any]) -> list[str]:
        """Why a trade with these arguments must not run (empty: it may)."""
        try:
            valid = tools.execute_trade.validate(dict(args))
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            return [f"invalid arguments: {problems}"]
        ticker, side, quantity = valid["ticker"].strip().upper(), valid["side"], valid["quantity"]
        reasons = []
        if ticker not in self.tickers:
            covered = ", ".join(self.tickers) or "no ticker"
            reasons.append(f"{ticker} is not in the approved report (it covers {covered})")
        if side != self.recommendation:
            reasons.append(f"the approved report recommends {self.recommendation}, not {side}")
        allowed = self.profile.trade_tickers
        if allowed and ticker not in allowed:
            reasons.append(
                f"{ticker} is not among the profile's tradable tickers ({', '.join(allowed)})"
            )
        held = self.profile.holdings.get(ticker, 0.0)
        if side == "sell" and quantity > held:
            reasons.append(f"selling {quantity} {ticker} is more than the {held:g} shares held")
        if quantity < 1:
            reasons.append(f"quantity must be at least 1, got {quantity}")
            return reasons
        try:
            value = tools.price(ticker) * quantity
        except ValueError as exc:
            return [*reasons, f"no price for {ticker}: {exc}"]
        if value > self.profile.hard_limit_usd:
            reasons.append(
                f"{value:,.2f} USD is over the hard limit of {self.profile.hard_limit_usd:,.0f} USD"
            )
        return reasons

    def asks(self, args: dict[str, Any]) -> bool:
        """`execute_trade`'s `requires_approval`: whether this trade waits for a person.

        It gets the arguments validated. A price it cannot find raises, and the library
        then asks: a predicate that cannot answer never lets a call through. A call judged
        before (see `known`) gets the answer it got then.
        """
        pinned = self._pinned.get(_args_key(args))
        if pinned is not None:
            return pinned
        value = tools.price(args["ticker"]) * args["quantity"]
        return value > self.profile.auto_approve_usd

    def policy(self, call: ToolCall) -> Literal["allow", "deny"]:
        """The loop's approval policy: deny what the rules refuse, allow the rest (the
        tool's predicate then decides whether a person is asked)."""
        if call.name != TRADE_TOOL:
            return "allow"  # the read-only look-ups
        check = self._known(call)
        if check is None:
            if self.closed or any(c.verdict != "refused" for c in self.checks.values()):
                reasons = ["one trade per proposal: this proposal's trade is already decided"]
            else:
                reasons = self.refusals(call.args)
            check = self._check(call, reasons)
            if self.on_check is not None:
                self.on_check(check)
        self.checks[call.id] = check
        return "deny" if check.verdict == "refused" else "allow"

    def _known(self, call: ToolCall) -> Check | None:
        """The check this call got before, if it is the same call: its verdict stands (and
        pins what `asks` answers for its arguments)."""
        check = self.known.get(call.id)
        if check is None:
            return None
        args = call.args
        same = (str(args.get("ticker", "?")).strip().upper(), str(args.get("side", "?")))
        if same != (check.ticker, check.side) or args.get("quantity") != check.quantity:
            return None  # another call under a reused id: judged afresh
        try:
            valid = tools.execute_trade.validate(dict(args))
        except pydantic.ValidationError:
            return check
        self._pinned[_args_key(valid)] = check.verdict == "ask"
        return check

    def _check(self, call: ToolCall, reasons: list[str]) -> Check:
        args = call.args
        ticker = str(args.get("ticker", "?")).strip().upper()
        quantity = args.get("quantity")
        quantity = quantity if isinstance(quantity, int) and not isinstance(quantity, bool) else 0
        try:
            price: float | None = tools.price(ticker)
        except ValueError:
            price = None
        value = round(price * quantity, 2) if price is not None else None
        verdict: Verdict = "refused" if reasons else "auto"
        if not reasons and (value is None or value > self.profile.auto_approve_usd):
            verdict = "ask"
        return Check(
            call_id=call.id,
            ticker=ticker,
            side=str(args.get("side", "?")),
            quantity=quantity,
            price=price,
            value_usd=value,
            verdict=verdict,
            reasons=reasons,
        )

    def tool(self, trade_id: str, approver: Approver, ledger: Path) -> Tool:
        """`execute_trade` for one proposal: its line in `ledger` is keyed by `trade_id`
        and names `approver`, and it asks a person above the profile's limit. A call the
        process died in (in doubt) runs again with the same idempotency key, which the
        ledger recognises: the trade is recorded once."""

        def execute_trade(ticker: str, side: Literal["buy", "sell"], quantity: int) -> str:
            return tools.record_trade(
                ticker,
                side,
                quantity,
                trade_id=trade_id,
                approved_by=approver.by,
                via=approver.via,
                ledger=ledger,
                call_key=idempotency_key(),
            )

        return Tool.from_function(
            execute_trade,
            description=(
                "Record a simulated trade in the local ledger (nothing is sent to a broker). "
                "Trades above the investor's limit wait for a person; trades over the hard "
                "limit or outside the profile or the approved report are refused. "
                "Arguments: ticker (symbol), side (buy or sell), quantity (shares, at least 1)."
            ),
            read_only=False,
            requires_approval=self.asks,
            on_doubt="rerun",
        )


def _args_key(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, default=str)
