"""The analyst's tools: read-only look-ups over a data source, and a simulated trade.

The look-ups read `settings.source`: the fixture data set unless `--live` chose the live
one (`sources.py`). Over the fixtures each sleeps for a simulated latency (per tool,
times `settings.latency_scale`) so the ReWOO worker's parallelism is visible and the
loop comparison has something to compare; tests set the scale to 0. An unknown ticker
raises `ValueError` naming the known tickers: the registry turns that into an `is_error`
result the model can act on. A trade is one line appended to a local ledger file, keyed
by its trade id so a proposal can never be recorded twice; a call run again with the same
idempotency key (after a crash) gets the line it wrote the first time.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentloops import Tool, tool
from market_analyst import data
from market_analyst.sources import DataSource, FixtureSource

try:  # POSIX: the ledger is locked across processes too (the CLI and the web app)
    import fcntl
except ImportError:  # pragma: no cover (Windows: the thread lock only)
    fcntl = None  # type: ignore[assignment]

LATENCY = {
    "get_stock_snapshot": 0.25,
    "get_price_history": 0.45,
    "search_news": 0.6,
    "search_competitors": 0.35,
    "get_financials": 0.5,
}
"""Seconds each look-up takes at `latency_scale=1.0` (uneven on purpose)."""


@dataclass
class Settings:
    """Process-wide tool settings; plain attributes so worker threads all see them."""

    latency_scale: float = 1.0
    ledger_path: Path = Path("ledger.jsonl")
    source: DataSource = field(default_factory=FixtureSource)


settings = Settings()
_ledger_lock = threading.Lock()


def configure(
    *,
    latency_scale: float | None = None,
    ledger_path: Path | None = None,
    source: DataSource | None = None,
) -> None:
    """Change the simulated latency scale (0 = instant), where trades are recorded, or
    where the figures come from (`FixtureSource()` is the default)."""
    if latency_scale is not None:
        if latency_scale < 0:
            raise ValueError(f"latency_scale must be >= 0, got {latency_scale}")
        settings.latency_scale = latency_scale
    if ledger_path is not None:
        settings.ledger_path = Path(ledger_path)
    if source is not None:
        settings.source = source


def _wait(name: str) -> None:
    # Only the fixtures pretend to be slow; a live source has latency of its own.
    seconds = LATENCY[name] * settings.latency_scale
    if seconds > 0 and isinstance(settings.source, FixtureSource):
        time.sleep(seconds)


def _json(value: object) -> str:
    return json.dumps(value, separators=(", ", ": "))


@tool
def get_stock_snapshot(ticker: str) -> str:
    """Current price, day change, market cap, P/E, EPS and 52-week range for one ticker.

    Args:
        ticker: the stock symbol (upper case)
    """
    settings.source.check(ticker)  # an unknown ticker fails before the simulated wait
    _wait("get_stock_snapshot")
    return _json(settings.source.snapshot(ticker))


@tool
def get_price_history(ticker: str, days: int = 30) -> str:
    """Daily closing prices for the last `days` trading days, with change, high and low.

    Args:
        ticker: the stock symbol (upper case)
        days: how many trading days, 5 to 252
    """
    if not 5 <= days <= data.HISTORY_DAYS:
        raise ValueError(f"days must be between 5 and {data.HISTORY_DAYS}, got {days}")
    settings.source.check(ticker)
    _wait("get_price_history")
    return _json(settings.source.history_window(ticker, days))


@tool
def search_news(ticker: str, limit: int = 4) -> str:
    """Recent news headlines about a company, newest first, with their sentiment.

    Args:
        ticker: the stock symbol (upper case)
        limit: at most this many articles, 1 to 10
    """
    if not 1 <= limit <= 10:
        raise ValueError(f"limit must be between 1 and 10, got {limit}")
    settings.source.check(ticker)
    _wait("search_news")
    return _json(settings.source.news(ticker, limit))


@tool
def search_competitors(ticker: str) -> str:
    """A company's closest listed competitors, with market cap, P/E, growth and margin.

    Args:
        ticker: the stock symbol (upper case)
    """
    settings.source.check(ticker)
    _wait("search_competitors")
    return _json(settings.source.competitors(ticker))


@tool
def get_financials(ticker: str) -> str:
    """Revenue, profits, EPS and free cash flow for the last three fiscal years, and the
    balance sheet's cash and debt, in billions of USD.

    Args:
        ticker: the stock symbol (upper case)
    """
    settings.source.check(ticker)
    _wait("get_financials")
    return _json(settings.source.financials(ticker))


def price(ticker: str) -> float:
    """The last price the data source has for `ticker`; raises `ValueError` when none."""
    settings.source.check(ticker)
    return float(settings.source.snapshot(ticker)["price"])


def record_trade(
    ticker: str,
    side: Literal["buy", "sell"],
    quantity: int,
    *,
    trade_id: str | None = None,
    approved_by: str = "unknown",
    via: str = "",
    ledger: Path | None = None,
    call_key: str | None = None,
) -> str:
    """Append one simulated trade to the ledger (`ledger`, else `settings.ledger_path`),
    at the data source's last price.

    With a `trade_id` the ledger holds at most one trade under it: a second one raises
    `ValueError`, checked and written under a lock (threads and, on POSIX, processes),
    unless it comes with the same `call_key` (the loop's idempotency key for the call):
    then it is the same call run again, and it gets the first one's line back.
    """
    if quantity < 1:
        raise ValueError(f"quantity must be at least 1, got {quantity}")
    last = price(ticker)
    entry = {
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "trade_id": trade_id,
        "ticker": ticker.strip().upper(),
        "side": side,
        "quantity": quantity,
        "price": last,
        "value_usd": round(last * quantity, 2),
        "approved_by": approved_by,
        "via": via,
        "source": settings.source.name,
        "note": "simulated trade; nothing was sent to a broker",
        "call_key": call_key,
    }
    path = ledger or settings.ledger_path
    with _ledger_lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+", encoding="utf-8") as file:
            if fcntl is not None:
                fcntl.flock(file, fcntl.LOCK_EX)  # released when the file closes
            file.seek(0)
            earlier = _find(file.read(), trade_id) if trade_id else None
            if earlier is not None and call_key is not None and earlier.get("call_key") == call_key:
                return _recorded(path, earlier)
            if earlier is not None:
                raise ValueError(
                    f"trade {trade_id} is already in the ledger ({earlier['side']} "
                    f"{earlier['quantity']} {earlier['ticker']} at {earlier['at']}); "
                    "one trade per proposal"
                )
            file.write(json.dumps(entry) + "\n")
    return _recorded(path, entry)


def _recorded(path: Path, entry: dict[str, Any]) -> str:
    """What the trader is told: the ledger line (its idempotency key is the loop's affair)."""
    shown = {k: v for k, v in entry.items() if k != "call_key"}
    return _json({"recorded": True, "ledger": str(path), **shown})


def _find(text: str, trade_id: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        if line.strip():
            entry: dict[str, Any] = json.loads(line)
            if entry.get("trade_id") == trade_id:
                return entry
    return None


def ledger_entries(path: Path | None = None) -> list[dict[str, Any]]:
    """Every trade in the ledger, oldest first (none when there is no ledger yet)."""
    path = path or settings.ledger_path
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def ledger_entry(trade_id: str, path: Path | None = None) -> dict[str, Any] | None:
    """The ledger's trade recorded under `trade_id`, if any."""
    path = path or settings.ledger_path
    return _find(path.read_text(encoding="utf-8"), trade_id) if path.exists() else None


@tool(requires_approval=True, read_only=False)
def execute_trade(ticker: str, side: Literal["buy", "sell"], quantity: int) -> str:
    """Record a simulated trade in the local ledger file.

    Nothing is sent to any broker: the trade is one JSON line appended to the ledger.
    This bare tool asks a person for every call; the trade guardian (`guardian.py`)
    builds the same tool with limits from the investor's profile.

    Args:
        ticker: the stock symbol (upper case)
        side: "buy" or "sell"
        quantity: number of shares, at least 1
    """
    return record_trade(ticker, side, quantity)


RESEARCH_TOOLS: list[Tool] = [
    get_stock_snapshot,
    get_price_history,
    search_news,
    search_competitors,
    get_financials,
]
"""The read-only look-ups both research routes get. A research run cannot trade."""

ALL_TOOLS: list[Tool] = [*RESEARCH_TOOLS, execute_trade]
