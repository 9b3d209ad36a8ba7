"""Live market data from Yahoo Finance (through yfinance), behind the same tools.

Optional: `--live` selects it, the `live` extra installs yfinance, and it needs internet
access. It answers in the fixture data's shapes (the same keys), so the tools, the
offline stand-in and the figure checks read it the same way; where Yahoo has no figure
the tool says so as an error rather than invent one. Competitors are not available
from Yahoo, so `search_competitors` fails with a message. Tests never call it: they
pass a fake module in place of yfinance.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

_TTL = 60.0  # seconds a ticker's quote and history are reused (one run asks several times)


def _round(value: Any, digits: int = 2) -> float | None:
    return None if value is None else round(float(value), digits)


def _billions(value: Any) -> float | None:
    return None if value is None else round(float(value) / 1e9, 1)


def _pct(value: Any) -> float | None:
    return None if value is None else round(float(value) * 100, 1)


class LiveSource:
    """A `DataSource` over the yfinance module it is given (the real one, or a fake)."""

    name = "live (Yahoo Finance)"
    notice = (
        "Live market data from Yahoo Finance via yfinance (may be delayed or incomplete). "
        "Not investment advice."
    )

    def __init__(self, yfinance: Any):
        self._yf = yfinance
        self._cache: dict[tuple[str, str], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def _get(self, ticker: str, what: str) -> Any:
        key = (ticker.strip().upper(), what)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < _TTL:
            return hit[1]
        handle = self._yf.Ticker(key[0])
        value = dict(handle.info or {}) if what == "info" else handle.history(period="1y")
        with self._lock:
            self._cache[key] = (time.monotonic(), value)
        return value

    def _source(self) -> str:
        stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes")
        return f"Yahoo Finance via yfinance, fetched {stamp} (live data)"

    def _closes(self, ticker: str) -> list[tuple[str, float]]:
        frame = self._get(ticker, "history")
        closes = [(str(day)[:10], round(float(close), 2)) for day, close in frame["Close"].items()]
        if not closes:
            raise ValueError(f"Yahoo Finance has no price history for {ticker.upper()}")
        return closes

    def check(self, ticker: str) -> None:
        info = self._get(ticker, "info")
        if info.get("currentPrice") is None and info.get("regularMarketPrice") is None:
            raise ValueError(
                f"unknown ticker {ticker.strip().upper()!r}: Yahoo Finance has no price"
            )

    def snapshot(self, ticker: str) -> dict[str, Any]:
        info, closes = self._get(ticker, "info"), [c for _, c in self._closes(ticker)]
        price = _round(info.get("currentPrice") or info.get("regularMarketPrice"))
        previous = _round(info.get("previousClose") or info.get("regularMarketPreviousClose"))
        eps = _round(info.get("trailingEps"))
        dividend = info.get("trailingAnnualDividendYield")
        return {
            "ticker": ticker.strip().upper(),
            "name": info.get("longName") or info.get("shortName") or ticker.upper(),
            "sector": info.get("sector", ""),
            "industry": info.get("industry", ""),
            "currency": info.get("currency", "USD"),
            "price": price,
            "previous_close": previous,
            "day_change_pct": (
                round((price / previous - 1) * 100, 2) if price and previous else None
            ),
            "market_cap_b": _billions(info.get("marketCap")),
            "pe_ratio": round(price / eps, 1) if price and eps and eps > 0 else None,
            "eps": eps,
            "week52_high": max(closes),
            "week52_low": min(closes),
            "dividend_yield_pct": _pct(dividend),
            "beta": _round(info.get("beta")),
            "as_of": dt.date.today().isoformat(),
            "source": self._source(),
        }

    def history_window(self, ticker: str, days: int) -> dict[str, Any]:
        window = self._closes(ticker)[-days:]
        closes = [c for _, c in window]
        return {
            "ticker": ticker.strip().upper(),
            "days": len(window),
            "start_date": window[0][0],
            "end_date": window[-1][0],
            "start_close": closes[0],
            "end_close": closes[-1],
            "change_pct": round((closes[-1] / closes[0] - 1) * 100, 2),
            "high": max(closes),
            "low": min(closes),
            "closes": [{"date": d, "close": c} for d, c in window],
            "source": self._source(),
        }

    def news(self, ticker: str, limit: int) -> dict[str, Any]:
        items = []
        for raw in list(self._yf.Ticker(ticker.strip().upper()).news or [])[:limit]:
            # yfinance's shape changed: newer versions nest the story under "content".
            story = raw.get("content") or raw
            when = story.get("pubDate") or story.get("providerPublishTime") or ""
            if isinstance(when, int | float):
                when = dt.datetime.fromtimestamp(when, dt.timezone.utc).isoformat()
            items.append(
                {
                    "date": str(when)[:10],
                    "headline": story.get("title", ""),
                    "sentiment": "unrated",  # Yahoo gives none; the model reads the headline
                    "summary": story.get("summary", ""),
                }
            )
        return {"ticker": ticker.strip().upper(), "articles": items, "source": self._source()}

    def competitors(self, ticker: str) -> dict[str, Any]:
        raise ValueError(
            "the live source has no competitor data (Yahoo Finance gives no peer list); "
            "run without --live for the fixture peers"
        )

    def financials(self, ticker: str) -> dict[str, Any]:
        info = self._get(ticker, "info")
        figures = {
            "revenue_b": _billions(info.get("totalRevenue")),
            "net_income_b": _billions(info.get("netIncomeToCommon")),
            "eps": _round(info.get("trailingEps")),
            "free_cash_flow_b": _billions(info.get("freeCashflow")),
            "revenue_growth_pct": _pct(info.get("revenueGrowth")),
            "gross_margin_pct": _pct(info.get("grossMargins")),
            "operating_margin_pct": _pct(info.get("operatingMargins")),
            "net_margin_pct": _pct(info.get("profitMargins")),
            "cash_b": _billions(info.get("totalCash")),
            "debt_b": _billions(info.get("totalDebt")),
        }
        missing = sorted(k for k, v in figures.items() if v is None)
        if missing:
            raise ValueError(
                f"Yahoo Finance gave no {', '.join(missing)} for {ticker.strip().upper()}"
            )
        latest = {k: figures[k] for k in ("revenue_b", "net_income_b", "eps", "free_cash_flow_b")}
        return {
            "ticker": ticker.strip().upper(),
            "currency": info.get("financialCurrency", "USD"),
            "fiscal_years": [{"fiscal_year": "trailing twelve months", **latest}],
            **{k: figures[k] for k in figures if k not in latest},
            "net_cash_b": round(figures["cash_b"] - figures["debt_b"], 1),  # type: ignore[operator]
            "source": self._source(),
        }
