"""The analyst's tools: read-only look-ups over the fixture data, and a simulated trade.

Each look-up sleeps for a simulated latency (per tool, times `settings.latency_scale`)
so the ReWOO worker's parallelism is visible and the loop comparison has something to
compare; tests set the scale to 0. An unknown ticker raises `ValueError` naming the
known tickers: the registry turns that into an `is_error` result the model can act on.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentloops import Tool, tool
from market_analyst import data

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


settings = Settings()
_ledger_lock = threading.Lock()


def configure(*, latency_scale: float | None = None, ledger_path: Path | None = None) -> None:
    """Change the simulated latency scale (0 = instant) or where trades are recorded."""
    if latency_scale is not None:
        if latency_scale < 0:
            raise ValueError(f"latency_scale must be >= 0, got {latency_scale}")
        settings.latency_scale = latency_scale
    if ledger_path is not None:
        settings.ledger_path = Path(ledger_path)


def _wait(name: str) -> None:
    seconds = LATENCY[name] * settings.latency_scale
    if seconds > 0:
        time.sleep(seconds)


def _json(value: object) -> str:
    return json.dumps(value, separators=(", ", ": "))


@tool
def get_stock_snapshot(ticker: str) -> str:
    """Current price, day change, market cap, P/E, EPS and 52-week range for one ticker.

    Args:
        ticker: the stock symbol (upper case)
    """
    data.company(ticker)  # an unknown ticker fails before the simulated wait
    _wait("get_stock_snapshot")
    return _json(data.snapshot(ticker))


@tool
def get_price_history(ticker: str, days: int = 30) -> str:
    """Daily closing prices for the last `days` trading days, with change, high and low.

    Args:
        ticker: the stock symbol (upper case)
        days: how many trading days, 5 to 252
    """
    if not 5 <= days <= data.HISTORY_DAYS:
        raise ValueError(f"days must be between 5 and {data.HISTORY_DAYS}, got {days}")
    data.company(ticker)
    _wait("get_price_history")
    return _json(data.history_window(ticker, days))


@tool
def search_news(ticker: str, limit: int = 4) -> str:
    """Recent news headlines about a company, newest first, with their sentiment.

    Args:
        ticker: the stock symbol (upper case)
        limit: at most this many articles, 1 to 10
    """
    if not 1 <= limit <= 10:
        raise ValueError(f"limit must be between 1 and 10, got {limit}")
    data.company(ticker)
    _wait("search_news")
    return _json(data.news(ticker, limit))


@tool
def search_competitors(ticker: str) -> str:
    """A company's closest listed competitors, with market cap, P/E, growth and margin.

    Args:
        ticker: the stock symbol (upper case)
    """
    data.company(ticker)
    _wait("search_competitors")
    return _json(data.competitors(ticker))


@tool
def get_financials(ticker: str) -> str:
    """Revenue, profits, EPS and free cash flow for the last three fiscal years, and the
    balance sheet's cash and debt, in billions of USD.

    Args:
        ticker: the stock symbol (upper case)
    """
    data.company(ticker)
    _wait("get_financials")
    return _json(data.financials(ticker))


@tool(requires_approval=True, read_only=False)
def execute_trade(ticker: str, side: Literal["buy", "sell"], quantity: int) -> str:
    """Record a simulated trade in the local ledger file. Needs a human's approval.

    Nothing is sent to any broker: the trade is one JSON line appended to the ledger.

    Args:
        ticker: the stock symbol (upper case)
        side: "buy" or "sell"
        quantity: number of shares, at least 1
    """
    if quantity < 1:
        raise ValueError(f"quantity must be at least 1, got {quantity}")
    price = data.snapshot(ticker)["price"]
    entry = {
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "ticker": ticker.upper(),
        "side": side,
        "quantity": quantity,
        "price": price,
        "note": "simulated trade at the fixture price; nothing was sent to a broker",
    }
    with _ledger_lock:
        settings.ledger_path.parent.mkdir(parents=True, exist_ok=True)
        with settings.ledger_path.open("a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(entry) + "\n")
    return _json({"recorded": True, "ledger": str(settings.ledger_path), **entry})


RESEARCH_TOOLS: list[Tool] = [
    get_stock_snapshot,
    get_price_history,
    search_news,
    search_competitors,
    get_financials,
]
"""The read-only look-ups both research routes get. A research run cannot trade."""

ALL_TOOLS: list[Tool] = [*RESEARCH_TOOLS, execute_trade]
