"""The command line's trades: propose one after a published report, decide one that waits,
list them.

After a report that recommends buying or selling is published, `--trade` proposes a
trade at once; at a terminal the person is asked instead. A trade that waits for a
person is decided at the prompt, or later with `--approve-trade TRADE_ID` or
`--deny-trade TRADE_ID` from any process; the first decision wins, and a second one is
refused (exit status 1). A trade another process is working on is refused with the
lease's holder and expiry (exit status 75, from `cli.main`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentloops import AgentLoopsError, ModelClient, RunLeased
from market_analyst import journal, models
from market_analyst.approve import Ask, who
from market_analyst.display import RunView, line
from market_analyst.flags import command_for
from market_analyst.store import PUBLISHED, AnalystStore
from market_analyst.trades import (
    APPLYING,
    OPEN,
    PROPOSING,
    WAITING,
    UnknownTrade,
    trade_id_for,
)
from market_analyst.trading import TRADABLE, NotTradable, NotWaiting, Trader, describe

ModelFor = Callable[[dict[str, Any]], ModelClient]
"""The trader's model for a run (its record carries the model settings it was run with)."""

_STYLE = {"executed": "green", "waiting": "yellow", "refused": "red", "denied": "red"}


def offer(
    console: Console,
    store: AnalystStore,
    run_id: str,
    args: argparse.Namespace,
    ask: Ask | None,
    model_for: ModelFor,
    *,
    just_published: bool,
) -> int:
    """After a run's decision: propose a trade if `--trade` says so, or (at a terminal,
    for a report published just now) if the person says so; returns the exit code."""
    record = store.get(run_id)
    report = store.archive.get(run_id)
    tradable = record["status"] == PUBLISHED and report is not None
    if not tradable or report is None or report.recommendation not in TRADABLE:
        if args.trade:
            why = (
                f"it is {record['status']}"
                if not tradable
                else f"the report recommends {report.recommendation if report else '?'}"
            )
            console.print(line(f"No trade for {run_id}: {why}."))
        return 0
    if not args.trade:
        if not just_published or store.trades.for_run(run_id) is not None:
            return 0
        what = f"{report.recommendation} {', '.join(report.tickers)}"
        if ask is None:
            console.print(
                line(
                    f"The report recommends {what}. Propose a simulated trade with:\n"
                    f"  {command_for(args, '--resume', run_id, '--trade')} [--budget USD]"
                ),
                soft_wrap=True,  # the command stays on one line
            )
            return 0
        try:
            answer = ask(f"The report recommends {what}. Propose a simulated trade? [y/N]: ")
        except (KeyboardInterrupt, EOFError):
            return 0
        if answer.strip().lower() not in ("y", "yes"):
            return 0
    journal.refuse_if_held(store.runs, trade_id_for(run_id))  # before a model is started
    console.rule(Text(f"Trade for {run_id} (simulated)"))
    try:
        view = RunView(console)
        trader = Trader(view.watch(model_for(record)), store, on_event=view)
        trade, new = trader.propose(run_id, by=who(args), budget_usd=args.budget)
    except RunLeased:
        raise  # the command line says who holds it
    except (NotTradable, ValueError, AgentLoopsError, models.MissingCredentials) as exc:
        console.print(line((f"No trade: {exc}", "red")))
        return 2
    if not new:
        console.print(line(f"Report {run_id} already led to trade {trade['trade_id']}:"))
    console.print(trade_panel(trade))
    if trade["status"] == WAITING and new:
        return _decide_now(console, store, trade, args, ask, model_for)
    return 0


def _decide_now(
    console: Console,
    store: AnalystStore,
    trade: dict[str, Any],
    args: argparse.Namespace,
    ask: Ask | None,
    model_for: ModelFor,
) -> int:
    trade_id = trade["trade_id"]
    later = (
        f"Trade {trade_id} waits for a person. Decide with:\n"
        f"  {command_for(args, '--approve-trade', trade_id)}\n"
        f"  {command_for(args, '--deny-trade', trade_id)}"
    )
    if ask is None:
        console.print(line(later), soft_wrap=True)
        return 0
    while True:
        try:
            answer = ask(f"Run trade {trade_id}? [y] run it  [n] deny it  [l] later: ")
        except (KeyboardInterrupt, EOFError):
            answer = "l"
        answer = answer.strip().lower()
        if answer in ("", "l", "later"):
            console.print(line(later), soft_wrap=True)
            return 0
        if answer in ("y", "yes", "n", "no"):
            return _apply(console, store, trade_id, answer[0] == "y", args, "prompt", model_for)
        console.print(line(f"Please answer y, n or l ({answer!r} is none of them)."))


def decide(
    console: Console, store: AnalystStore, args: argparse.Namespace, model_for: ModelFor
) -> int:
    """`--approve-trade TRADE_ID` or `--deny-trade TRADE_ID`."""
    approve = bool(args.approve_trade)
    trade_id = args.approve_trade or args.deny_trade
    via = "--approve-trade" if approve else "--deny-trade"
    return _apply(console, store, trade_id, approve, args, via, model_for)


def _apply(
    console: Console,
    store: AnalystStore,
    trade_id: str,
    approve: bool,
    args: argparse.Namespace,
    via: str,
    model_for: ModelFor,
) -> int:
    try:
        trade = store.trades.get(trade_id)
        changed = False
        if trade["status"] in OPEN:  # else: refused below, without starting a model
            model = model_for(store.get(trade["run_id"]))
            console.rule(Text(f"Trade {trade_id}: {'approve' if approve else 'deny'}"))
            view = RunView(console)
            trader = Trader(view.watch(model), store, on_event=view)
            trade, changed = trader.decide(trade_id, approve, by=who(args), via=via)
        elif trade.get("decision") is None:
            raise NotWaiting(f"trade {trade_id} is {trade['status']}: no decision is waiting")
    except (UnknownTrade, NotWaiting) as exc:
        console.print(line((str(exc), "red")))
        return 2
    except RunLeased:
        raise  # the command line says who holds it
    except (AgentLoopsError, models.MissingCredentials) as exc:
        console.print(line((f"The trade stopped: {type(exc).__name__}: {exc}", "red")))
        return 1
    if not changed:
        first = trade.get("decision") or {}
        mine = "approval" if approve else "denial"
        console.print(
            line(
                (
                    f"Trade {trade_id} was already decided by {first.get('by', '?')} "
                    f"({first.get('via', '?')}) at {first.get('at', '?')}; it is "
                    f"{trade['status']}. Your {mine} was refused.",
                    "red",
                )
            )
        )
        return 1
    console.print(trade_panel(trade))
    return 0


def list_trades(console: Console, store: AnalystStore) -> int:
    """`--trades`: every proposal, newest first, with what became of it."""
    found = store.trades.list()
    if not found:
        console.print(line("No trades proposed yet."))
        return 0
    table = Table(title="Trade proposals (simulated), newest first", title_justify="left")
    for column in ("trade", "report", "status", "trade proposed", "decided by"):
        table.add_column(column)
    for t in found:
        decided = (t.get("decision") or {}).get("by") or _approver(t)
        cells = (t["trade_id"], t["run_id"], _status(t), describe(t), decided)
        table.add_row(*map(Text, cells))
    console.print(table)
    return 0


def _status(trade: dict[str, Any]) -> str:
    """The status, and for one caught part-way, whether a process is on it now."""
    status = str(trade["status"])
    if trade.get("lease"):
        return f"{status} (held by {trade['lease']['holder']})"
    if status in (PROPOSING, APPLYING):  # its process died: the next attempt finishes it
        return f"{status} (stopped; propose or decide again to finish it)"
    return status


def _approver(trade: dict[str, Any]) -> str:
    entry = trade.get("ledger_entry") or {}
    return str(entry.get("approved_by", "-"))


def trade_panel(trade: dict[str, Any]) -> Panel:
    """One proposal: the trade, the guardian's verdict and reasons, what happened."""
    status = trade["status"]
    limits = trade.get("limits") or {}
    rows = [
        line(("Trade: ", "bold"), describe(trade)),
        line(
            ("Limits: ", "bold"),
            f"unasked up to {limits.get('auto_approve_usd', 0):,.0f} USD, refused above "
            f"{limits.get('hard_limit_usd', 0):,.0f} USD",
        ),
    ]
    for c in trade.get("calls") or []:
        for reason in c.get("reasons", []):
            rows.append(line(("Refused: ", "red"), reason))
    entry = trade.get("ledger_entry")
    if entry:
        rows.append(
            line(
                ("Ledger: ", "bold"),
                f"{entry['side']} {entry['quantity']} {entry['ticker']} at {entry['price']} "
                f"USD, approved by {entry['approved_by']} ({entry['via']}) at {entry['at']}",
            )
        )
    decision = trade.get("decision")
    if decision:
        verb = "approved" if decision["approved"] else "denied"
        rows.append(line(("Decision: ", "bold"), f"{verb} by {decision['by']} ({decision['via']})"))
    if trade.get("answer"):
        rows.append(line(("Agent: ", "bold"), trade["answer"]))
    if trade.get("error"):
        rows.append(line(("Error: ", "red"), trade["error"]))
    body = Text("\n").join(rows)
    title = line(f"Trade {trade['trade_id']}: ", (status, "bold"))
    return Panel(body, title=title, border_style=_STYLE.get(status, "white"))
