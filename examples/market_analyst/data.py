"""The example's fixture data set: invented, plausible, internally consistent, deterministic.

`fixtures.json` holds a few hand-written figures per company; everything else is derived
here so the numbers agree with each other (market cap = price x shares, P/E = price /
EPS, the snapshot's last price is the price history's last close, 52-week range from
that history). It is NOT live market data, and every tool output says so.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import random
import zlib
from pathlib import Path
from typing import Any

_RAW = json.loads((Path(__file__).with_name("fixtures.json")).read_text(encoding="utf-8"))

AS_OF: str = _RAW["as_of"]
NOTICE: str = _RAW["_notice"]
SOURCE = f"fixture data as of {AS_OF} (not live market data)"
"""Stamped on every tool output, so the model and the reader both see it."""
TICKERS: tuple[str, ...] = tuple(sorted(_RAW["companies"]))
HISTORY_DAYS = 252
"""Trading days of price history kept per ticker (one year)."""
FISCAL_YEARS = (2023, 2024, 2025)


class UnknownTicker(ValueError):
    """A ticker the fixture data set does not hold; the message names those it does."""

    def __init__(self, ticker: str):
        super().__init__(f"unknown ticker {ticker!r}; known tickers: {', '.join(TICKERS)}")


def company(ticker: str) -> dict[str, Any]:
    """The raw fixture record for a ticker (case-insensitive); raises `UnknownTicker`."""
    record = _RAW["companies"].get(ticker.strip().upper())
    if record is None:
        raise UnknownTicker(ticker)
    return record  # type: ignore[no-any-return]


def _trading_days(end: dt.date, count: int) -> list[dt.date]:
    days: list[dt.date] = []
    day = end
    while len(days) < count:
        if day.weekday() < 5:  # fixture calendar: weekdays, no holidays
            days.append(day)
        day -= dt.timedelta(days=1)
    return days[::-1]


@functools.cache
def price_history(ticker: str) -> list[tuple[str, float]]:
    """One year of (date, close), ending on `AS_OF` at the fixture price.

    A seeded random walk (seed = CRC32 of the ticker) scaled so the last close is
    exactly the snapshot price; volatility follows the company's beta.
    """
    record = company(ticker)
    rnd = random.Random(zlib.crc32(ticker.upper().encode()))
    sigma = 0.011 * record["beta"]
    walk = [1.0]
    for _ in range(HISTORY_DAYS - 1):
        walk.append(walk[-1] * (1 + 0.0006 + (rnd.random() - 0.5) * 2 * sigma * 1.73))
    scale = record["price"] / walk[-1]
    closes = [round(v * scale, 2) for v in walk]
    closes[-1] = record["price"]
    days = _trading_days(dt.date.fromisoformat(AS_OF), HISTORY_DAYS)
    return [(d.isoformat(), c) for d, c in zip(days, closes, strict=True)]


def financials(ticker: str) -> dict[str, Any]:
    """Three fiscal years of income-statement figures, in billions of USD."""
    r = company(ticker)
    years = []
    for i, year in enumerate(FISCAL_YEARS):
        revenue = r["revenue_b"][i]
        net_income = round(revenue * r["net_margin_pct"][i] / 100, 1)
        years.append(
            {
                "fiscal_year": year,
                "revenue_b": revenue,
                "gross_profit_b": round(revenue * r["gross_margin_pct"] / 100, 1),
                "operating_income_b": round(revenue * r["operating_margin_pct"][i] / 100, 1),
                "net_income_b": net_income,
                "eps": round(net_income / r["shares_b"], 2),
                "free_cash_flow_b": round(net_income * r["fcf_to_net_income"], 1),
            }
        )
    latest, previous = r["revenue_b"][-1], r["revenue_b"][-2]
    return {
        "ticker": ticker.upper(),
        "currency": "USD",
        "fiscal_years": years[::-1],  # newest first
        "revenue_growth_pct": round((latest / previous - 1) * 100, 1),
        "gross_margin_pct": r["gross_margin_pct"],
        "operating_margin_pct": r["operating_margin_pct"][-1],
        "net_margin_pct": r["net_margin_pct"][-1],
        "cash_b": r["cash_b"],
        "debt_b": r["debt_b"],
        "net_cash_b": round(r["cash_b"] - r["debt_b"], 1),
        "source": SOURCE,
    }


def snapshot(ticker: str) -> dict[str, Any]:
    """Price, day change, valuation and 52-week range, all consistent with the rest."""
    r = company(ticker)
    history = price_history(ticker)
    closes = [c for _, c in history]
    price, previous = closes[-1], closes[-2]
    eps = financials(ticker)["fiscal_years"][0]["eps"]
    return {
        "ticker": ticker.upper(),
        "name": r["name"],
        "sector": r["sector"],
        "industry": r["industry"],
        "currency": "USD",
        "price": price,
        "previous_close": previous,
        "day_change_pct": round((price / previous - 1) * 100, 2),
        "market_cap_b": round(price * r["shares_b"], 1),
        "pe_ratio": round(price / eps, 1) if eps > 0 else None,
        "eps": eps,
        "week52_high": max(closes),
        "week52_low": min(closes),
        "dividend_yield_pct": r["dividend_yield_pct"],
        "beta": r["beta"],
        "as_of": AS_OF,
        "source": SOURCE,
    }


def history_window(ticker: str, days: int) -> dict[str, Any]:
    """The last `days` closes with their summary (change, high, low)."""
    window = price_history(ticker)[-days:]
    closes = [c for _, c in window]
    return {
        "ticker": ticker.upper(),
        "days": days,
        "start_date": window[0][0],
        "end_date": window[-1][0],
        "start_close": closes[0],
        "end_close": closes[-1],
        "change_pct": round((closes[-1] / closes[0] - 1) * 100, 2),
        "high": max(closes),
        "low": min(closes),
        "closes": [{"date": d, "close": c} for d, c in window],
        "source": SOURCE,
    }


def news(ticker: str, limit: int) -> dict[str, Any]:
    """Recent headlines, newest first; the first is built from the financials."""
    r = company(ticker)
    fin = financials(ticker)
    growth = fin["revenue_growth_pct"]
    earnings = {
        "date": "2025-06-27",
        "headline": (
            f"{r['name']} reports fiscal {FISCAL_YEARS[-1]} revenue of "
            f"{r['revenue_b'][-1]} billion USD, {'up' if growth >= 0 else 'down'} "
            f"{abs(growth)}% on the year"
        ),
        "sentiment": "positive" if growth >= 5 else "neutral" if growth >= 0 else "negative",
        "summary": f"Operating margin was {fin['operating_margin_pct']}%.",
    }
    items = [earnings] + [
        {"date": d, "headline": h, "sentiment": s, "summary": t} for d, s, h, t in r["news"]
    ]
    items.sort(key=lambda item: item["date"], reverse=True)
    return {"ticker": ticker.upper(), "articles": items[:limit], "source": SOURCE}


def competitors(ticker: str) -> dict[str, Any]:
    """The company's peers (all in the fixture set) with comparable figures."""
    peers = []
    for peer in company(ticker)["peers"]:
        snap, fin = snapshot(peer), financials(peer)
        peers.append(
            {
                "ticker": peer,
                "name": snap["name"],
                "market_cap_b": snap["market_cap_b"],
                "pe_ratio": snap["pe_ratio"],
                "revenue_growth_pct": fin["revenue_growth_pct"],
                "operating_margin_pct": fin["operating_margin_pct"],
            }
        )
    return {"ticker": ticker.upper(), "peers": peers, "source": SOURCE}
