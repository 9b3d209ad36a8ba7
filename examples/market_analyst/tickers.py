"""Which tickers a piece of text names: symbols in any case, and known company names.

The workflow uses it to find the last published report on the same ticker (memory);
the offline demo model uses it to read requests and plan steps.
"""

from __future__ import annotations

import re

from market_analyst import data

_NOT_TICKERS = {"A", "I", "AI", "CEO", "CFO", "EPS", "ETF", "FY", "IPO", "JSON", "PE", "USD", "US"}
_NAMES = {
    "nvidia": "NVDA",
    "amd": "AMD",
    "intel": "INTC",
    "microsoft": "MSFT",
    "apple": "AAPL",
    "alphabet": "GOOGL",
    "google": "GOOGL",
    "amazon": "AMZN",
    "meta": "META",
    "facebook": "META",
    "oracle": "ORCL",
}
_KNOWN = {t.lower(): t for t in data.TICKERS}


def tickers_in(text: str, *, limit: int = 3) -> list[str]:
    """Tickers the text names, in order, without repeats, at most `limit`.

    An upper-case word of one to five letters counts as a symbol even when the data set
    does not know it (so a typo reaches the tools and fails there, visibly); a word in
    any case that is a known symbol ("nvda") or a known company name ("Nvidia") counts too.
    """
    found: list[str] = []
    for word in re.findall(r"[A-Za-z][A-Za-z.&-]*", text):
        bare = word.strip(".")
        folded = bare.lower()
        if folded in _KNOWN:
            found.append(_KNOWN[folded])
        elif folded in _NAMES:
            found.append(_NAMES[folded])
        elif bare.isupper() and 1 <= len(bare) <= 5 and bare not in _NOT_TICKERS:
            found.append(bare)
    return list(dict.fromkeys(found))[:limit]
