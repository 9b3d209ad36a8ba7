"""Long-term memory: the investor's profile, kept in the same database as the runs.

The profile (risk tolerance, horizon, holdings, preferences) is set and shown from the
command line and given to the planners and to the role that writes the report (the ReWOO
solver or the Plan-and-Execute reporter), with the last published report on the same
ticker, so a new report can say what changed. Its trade
limits (what may be traded without asking, what never) are the trade guardian's rules.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Literal

import pydantic

from market_analyst.db import transaction


class Profile(pydantic.BaseModel):
    """What the analyst knows about its user. Every field has a neutral default."""

    model_config = pydantic.ConfigDict(extra="forbid")

    risk_tolerance: Literal["low", "medium", "high"] = "medium"
    horizon: Literal["short", "medium", "long"] = pydantic.Field(
        default="medium", description="short: under a year; medium: 1 to 5 years; long: 5+"
    )
    holdings: dict[str, float] = pydantic.Field(
        default_factory=dict, description="ticker to number of shares held"
    )
    preferences: str = ""
    auto_approve_usd: float = pydantic.Field(
        default=1000.0, ge=0, description="a trade worth up to this goes through without asking"
    )
    hard_limit_usd: float = pydantic.Field(
        default=10000.0, ge=0, description="a trade worth more than this is refused"
    )
    trade_tickers: list[str] = pydantic.Field(
        default_factory=list, description="the tickers the agent may trade (empty: any)"
    )

    @pydantic.field_validator("trade_tickers")
    @classmethod
    def _symbols(cls, tickers: list[str]) -> list[str]:
        out = []
        for ticker in tickers:
            symbol = ticker.strip().upper()
            if not symbol.isalpha() or not 1 <= len(symbol) <= 5:
                raise ValueError(f"{ticker!r} is not a ticker symbol")
            out.append(symbol)
        return list(dict.fromkeys(out))

    @pydantic.model_validator(mode="after")
    def _limits(self) -> Profile:
        if self.auto_approve_usd > self.hard_limit_usd:
            raise ValueError(
                f"auto_approve_usd ({self.auto_approve_usd:g}) is above hard_limit_usd "
                f"({self.hard_limit_usd:g}): a trade cannot go through unasked and be refused"
            )
        return self

    @pydantic.field_validator("holdings")
    @classmethod
    def _shares(cls, holdings: dict[str, float]) -> dict[str, float]:
        out = {}
        for ticker, shares in holdings.items():
            symbol = ticker.strip().upper()
            if not symbol.isalpha() or not 1 <= len(symbol) <= 5:
                raise ValueError(f"{ticker!r} is not a ticker symbol")
            if shares <= 0:
                raise ValueError(f"{symbol}: shares must be more than 0, got {shares:g}")
            out[symbol] = shares
        return out

    def describe(self) -> str:
        """One paragraph for a prompt."""
        held = ", ".join(f"{t} {n:g} shares" for t, n in self.holdings.items()) or "none"
        lines = [
            f"Risk tolerance: {self.risk_tolerance}.",
            f"Horizon: {self.horizon}.",
            f"Holdings: {held}.",
        ]
        if self.preferences.strip():
            lines.append(f"Preferences: {' '.join(self.preferences.split())}")
        return " ".join(lines)

    def describe_limits(self) -> str:
        """The trade guardian's rules, in one paragraph for the trader's prompt."""
        tickers = ", ".join(self.trade_tickers) or "any ticker"
        return (
            f"Trades worth up to {self.auto_approve_usd:,.0f} USD go through at once; larger "
            f"ones wait for a person; any trade worth more than {self.hard_limit_usd:,.0f} USD "
            f"is refused. Tradable: {tickers}. Selling more shares than held is refused."
        )


def parse_tickers(text: str) -> list[str]:
    """ "NVDA, msft" to ["NVDA", "MSFT"]; "" clears (any ticker may be traded)."""
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_holdings(text: str) -> dict[str, float]:
    """ "NVDA=10, MSFT=2.5" to {"NVDA": 10.0, "MSFT": 2.5}; "" clears. Raises ValueError."""
    holdings: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        ticker, sep, shares = item.partition("=")
        if not sep:
            raise ValueError(f"holdings are TICKER=SHARES, comma-separated; got {item!r}")
        try:
            holdings[ticker.strip()] = float(shares)
        except ValueError:
            raise ValueError(f"{ticker.strip()}: {shares.strip()!r} is not a number") from None
    return holdings


class ProfileStore:
    """The profile in table `profile` of the example's database (one row)."""

    def __init__(self, path: Path):
        self.path = path
        with transaction(path, write=True) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS profile ("
                " id INTEGER PRIMARY KEY CHECK (id = 1), data TEXT NOT NULL, updated TEXT)"
            )

    def get(self) -> Profile:
        """The saved profile, or the defaults when none was set."""
        with transaction(self.path) as db:
            row = db.execute("SELECT data FROM profile WHERE id = 1").fetchone()
        return Profile() if row is None else Profile.model_validate_json(row[0])

    def update(self, **changes: Any) -> Profile:
        """Change some fields; raises `pydantic.ValidationError` naming a bad one."""
        with transaction(self.path, write=True) as db:
            row = db.execute("SELECT data FROM profile WHERE id = 1").fetchone()
            current = Profile() if row is None else Profile.model_validate_json(row[0])
            profile = Profile.model_validate({**current.model_dump(), **changes})
            db.execute(
                "INSERT INTO profile (id, data, updated) VALUES (1, ?, ?) ON CONFLICT(id) "
                "DO UPDATE SET data = excluded.data, updated = excluded.updated",
                (profile.model_dump_json(), dt.datetime.now(dt.timezone.utc).isoformat()),
            )
        return profile
