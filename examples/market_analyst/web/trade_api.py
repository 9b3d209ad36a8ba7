"""The web app's trades: propose one after a published report, decide one that waits.

`POST /api/runs/ID/trade` runs the trade proposal (`Trader.propose`, a small ReAct loop
guarded by the profile) in a worker thread; `POST /api/trades/ID/decision` approves or
denies a trade that waits. Both are taken once across tabs and processes (under the
proposal's lease, the decision a keyed journal record): a second proposal for a report, or
a second decision on a trade, changes nothing and is answered 409 with the trade as the
first one left it; one made while another process works on the trade, 409 with its lease.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloops import AgentLoopsError, RunLeased
from market_analyst.models import Clients
from market_analyst.store import AnalystStore
from market_analyst.trades import WAITING
from market_analyst.trading import NotTradable, NotWaiting, Trader, describe
from market_analyst.web.guard import BadInput, error, json_body, text_field

MAX_BUDGET_USD = 1e9


class TradeAPI:
    """The trade endpoints over one store, with the trader on `clients.main`."""

    def __init__(self, store: AnalystStore, clients: Clients, user: str):
        self.store, self.clients, self.user = store, clients, user

    def endpoints(self) -> list[tuple[str, Callable[..., Any], list[str]]]:
        return [
            ("/api/trades", self.list_trades, ["GET"]),
            ("/api/runs/{run_id}/trade", self.propose, ["POST"]),
            ("/api/trades/{trade_id}/decision", self.decide, ["POST"]),
        ]

    def _by(self, body: dict[str, Any]) -> str:
        return " ".join(text_field(body, "by", self.user).split())[:80] or self.user

    async def list_trades(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.trades.list)
        waiting = [trade_view(t) for t in found if t["status"] == WAITING]
        return JSONResponse({"waiting": waiting, "recent": [trade_view(t) for t in found[:20]]})

    async def propose(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = await json_body(request)
        budget = body.get("budget_usd")
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, int | float)
            or not 0 <= budget <= MAX_BUDGET_USD
        ):
            raise BadInput(f"budget_usd must be a number from 0 to {MAX_BUDGET_USD:,.0f}, or null")
        trader = Trader(self.clients.main, self.store)
        try:
            trade, new = await run_in_threadpool(
                lambda: trader.propose(run_id, by=self._by(body), budget_usd=budget)
            )
        except NotTradable as exc:
            return error(f"No trade: {exc}.", 409)
        except RunLeased:
            raise  # answered 409 with the lease by `guarded`
        except AgentLoopsError as exc:  # saved as failed; proposing again is allowed
            trade = await run_in_threadpool(self.store.trades.for_run, run_id)
            failed = trade_view(trade) if trade is not None else None
            return error(
                f"The trade proposal stopped: {type(exc).__name__}: {exc}", 502, trade=failed
            )
        if not new:
            message = (
                f"Report {run_id} already led to trade {trade['trade_id']} ({trade['status']})."
            )
            return error(message, 409, trade=trade_view(trade))
        return JSONResponse({"message": _outcome(trade), "trade": trade_view(trade)})

    async def decide(self, request: Request) -> Response:
        trade_id = request.path_params["trade_id"]
        body = await json_body(request)
        action = text_field(body, "action")
        if action not in ("approve", "deny"):
            raise BadInput(f"action must be approve or deny, got {action!r}")
        trader = Trader(self.clients.main, self.store)
        approve, by = action == "approve", self._by(body)
        try:
            trade, changed = await run_in_threadpool(
                lambda: trader.decide(trade_id, approve, by=by, via="web")
            )
        except NotWaiting as exc:
            return error(str(exc), 409)
        except RunLeased:
            raise  # answered 409 with the lease by `guarded`
        except AgentLoopsError as exc:
            trade = await run_in_threadpool(self.store.trades.get, trade_id)
            message = f"The trade stopped: {type(exc).__name__}: {exc}"
            return error(message, 502, trade=trade_view(trade))
        if not changed:
            first = trade.get("decision") or {}
            mine = "approval" if approve else "denial"
            message = (
                f"Trade {trade_id} was already decided by {first.get('by', '?')} "
                f"({first.get('via', '?')}) at {first.get('at', '?')}; it is {trade['status']}. "
                f"Your {mine} was refused."
            )
            return error(message, 409, trade=trade_view(trade))
        return JSONResponse({"message": _outcome(trade), "trade": trade_view(trade)})


def _outcome(trade: dict[str, Any]) -> str:
    status, trade_id = trade["status"], trade["trade_id"]
    return {
        "executed": f"Trade {trade_id} recorded in the ledger (simulated).",
        "waiting": f"Trade {trade_id} waits for a person: it is above the profile's limit.",
        "refused": f"Trade {trade_id} refused by the trade guardian; nothing was recorded.",
        "denied": f"Trade {trade_id} denied; nothing was recorded.",
        "none": f"No trade proposed for {trade['run_id']}.",
    }.get(status, f"Trade {trade_id} is {status}.")


def trade_view(trade: dict[str, Any]) -> dict[str, Any]:
    """A trade for the page: what was proposed, the guardian's verdict and reasons, who
    decided, the ledger line. (The paused transcript stays on the server.)"""
    entry = trade.get("ledger_entry")
    return {
        "trade_id": trade["trade_id"],
        "run_id": trade["run_id"],
        "status": trade["status"],
        "summary": describe(trade),
        "budget_usd": trade.get("budget_usd"),
        "limits": trade.get("limits") or {},
        "calls": trade.get("calls") or [],
        "decision": trade.get("decision"),
        "ledger_entry": entry,
        "approved_by": entry["approved_by"] if entry else None,
        "answer": trade.get("answer", ""),
        "error": trade.get("error"),
        "lease": trade.get("lease"),
    }
