"""The read-and-set commands: runs waiting, one run's draft or report, the archive (list
and full-text search), and the investor profile."""

from __future__ import annotations

import argparse
from typing import Any

import pydantic
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from market_analyst.display import line
from market_analyst.memory import Profile, parse_holdings, parse_tickers
from market_analyst.store import AnalystStore, UnknownRun

PROFILE_FLAGS = (
    "risk_tolerance",
    "horizon",
    "holdings",
    "preferences",
    "auto_approve_usd",
    "hard_limit_usd",
    "trade_tickers",
)


def list_runs(console: Console, store: AnalystStore) -> int:
    """`--list`: from the run store's headers (`list_runs`): runs waiting for a decision,
    runs stopped part-way, and runs another process is working on now (with its lease)."""
    unfinished = store.interrupted()
    stopped = [i.run_id for i in unfinished if not i.leased]
    console.print(line("Waiting for a decision: " + (", ".join(store.pending()) or "none")))
    console.print(line("Stopped part-way (resumable): " + (", ".join(stopped) or "none")))
    for info in unfinished:
        if info.leased and info.lease_expires_at is not None:
            until = f"{info.lease_expires_at:%H:%M:%S} UTC"
            console.print(line(f"Running now: {info.run_id}, held by {info.holder} until {until}"))
    return 0


def show(console: Console, store: AnalystStore, run_id: str) -> int:
    """The published report, else the draft; raw Markdown when the output is not a
    terminal, so `--show RUN_ID > draft.md` gives a file to edit."""
    archived = store.archive.get(run_id)
    if archived is not None:
        text = archived.markdown
    else:
        try:
            record = store.get(run_id)
        except UnknownRun as exc:
            console.print(line((str(exc), "red")))
            return 2
        if "draft" not in record:
            console.print(line(f"Run {run_id} has no draft yet ({record['status']})."))
            return 1
        text = record["draft"]
    if console.is_terminal:
        console.print(Markdown(text))
    else:
        console.file.write(text)
    return 0


def reports(console: Console, store: AnalystStore, limit: int = 20) -> int:
    found = store.archive.recent(limit)
    if not found:
        console.print(line("No published reports yet."))
        return 0
    table = Table(title="Published reports, newest first", title_justify="left")
    for column in ("run", "published", "recommendation", "tickers", "title"):
        table.add_column(column)
    for r in found:
        cells = (r.run_id, r.published[:16], r.recommendation, " ".join(r.tickers), r.title)
        table.add_row(*map(Text, cells))
    console.print(table)
    return 0


def search(console: Console, store: AnalystStore, query: str) -> int:
    hits = store.archive.search(query)
    if not hits:
        console.print(line(f"No published report matches {query!r}."))
        return 0
    table = Table(title=f"Reports matching {query!r}, best first", title_justify="left")
    for column in ("run", "published", "recommendation", "title", "passage"):
        table.add_column(column)
    for h in hits:
        cells = (h.run_id, h.published[:10], h.recommendation, h.title, h.snippet)
        table.add_row(*map(Text, cells))
    console.print(table)
    return 0


def profile(console: Console, store: AnalystStore, args: argparse.Namespace) -> int:
    """Set the profile fields given as flags (if any), then show the profile."""
    changes: dict[str, Any] = {
        k: getattr(args, k) for k in PROFILE_FLAGS if getattr(args, k) is not None
    }
    try:
        if "holdings" in changes:
            changes["holdings"] = parse_holdings(changes["holdings"])
        if "trade_tickers" in changes:
            changes["trade_tickers"] = parse_tickers(changes["trade_tickers"])
        current = store.profile.update(**changes) if changes else store.profile.get()
    except (ValueError, pydantic.ValidationError) as exc:
        console.print(line((f"Profile not changed: {_reason(exc)}", "red")))
        return 2
    console.print(profile_table(current, saved=bool(changes)))
    return 0


def _reason(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return str(exc)


def profile_table(p: Profile, *, saved: bool = False) -> Table:
    title = "Investor profile" + (" (saved)" if saved else "")
    table = Table(title=title, title_justify="left", show_header=False)
    held = ", ".join(f"{t} {n:g}" for t, n in p.holdings.items()) or "none"
    for name, value in (
        ("risk tolerance", p.risk_tolerance),
        ("horizon", p.horizon),
        ("holdings", held),
        ("preferences", p.preferences or "none"),
        ("trades without asking", f"up to {p.auto_approve_usd:,.2f} USD"),
        ("trades refused", f"above {p.hard_limit_usd:,.2f} USD"),
        ("tradable tickers", ", ".join(p.trade_tickers) or "any"),
    ):
        table.add_row(Text(name, style="bold"), Text(value))
    return table
