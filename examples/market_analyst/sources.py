"""Where the tools' figures come from: the fixture data set (the default), or a live source.

The tools call one `DataSource`, so the same tool functions (names, arguments, output
shapes) serve either. `FixtureSource` reads `data.py` and never touches the network;
`market_analyst.live.LiveSource` (the `live` extra, `--live`) asks Yahoo Finance.
"""

from __future__ import annotations

from typing import Any, Protocol

from market_analyst import data


class DataSource(Protocol):
    """What the tools need. Each method raises `ValueError` (naming the problem) for a
    ticker it has no data for; the registry turns that into an error the model sees."""

    name: str
    """Short, for the screen and the record: "fixture" or "live (Yahoo Finance)"."""
    notice: str
    """One sentence stamped on published reports: where the figures came from."""

    def check(self, ticker: str) -> None:
        """Raise `ValueError` when the source has nothing for `ticker`."""
        ...

    def snapshot(self, ticker: str) -> dict[str, Any]: ...

    def history_window(self, ticker: str, days: int) -> dict[str, Any]: ...

    def news(self, ticker: str, limit: int) -> dict[str, Any]: ...

    def competitors(self, ticker: str) -> dict[str, Any]: ...

    def financials(self, ticker: str) -> dict[str, Any]: ...


class FixtureSource:
    """The invented, deterministic data set shipped with the example (`fixtures.json`)."""

    name = "fixture"
    notice = data.NOTICE

    def check(self, ticker: str) -> None:
        data.company(ticker)

    def snapshot(self, ticker: str) -> dict[str, Any]:
        return data.snapshot(ticker)

    def history_window(self, ticker: str, days: int) -> dict[str, Any]:
        return data.history_window(ticker, days)

    def news(self, ticker: str, limit: int) -> dict[str, Any]:
        return data.news(ticker, limit)

    def competitors(self, ticker: str) -> dict[str, Any]:
        return data.competitors(ticker)

    def financials(self, ticker: str) -> dict[str, Any]:
        return data.financials(ticker)


class MissingExtra(RuntimeError):
    """An optional part needs a package that is not installed; the message says which."""


def live_source() -> DataSource:
    """The live source, or `MissingExtra` naming the `live` extra when yfinance is missing."""
    try:
        import yfinance
    except ImportError:
        raise MissingExtra(
            "live data needs the 'live' extra (yfinance, and internet access): "
            "pip install 'agentloops-kit[live]'"
        ) from None
    from market_analyst.live import LiveSource

    return LiveSource(yfinance)
