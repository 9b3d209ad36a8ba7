"""Reading tool outputs back: find them in a prompt, state them as findings, check a draft.

The offline demo model writes only from what these functions find in the request it
receives, so every figure it prints was produced by a tool in this run. The same
number extraction is the demo evaluator's check: a figure in the draft that is not in
the evidence is an invented number.
"""

from __future__ import annotations

import json
import re
from typing import Any

NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
_UNKNOWN = re.compile(r"unknown ticker '([^']*)'")
_DECODER = json.JSONDecoder()


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every tool-output JSON object found in `text` (objects with a "ticker"), in order."""
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            value, end = _DECODER.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict) and "ticker" in value and value not in found:
            found.append(value)
        i = text.find("{", end)
    return found


def unknown_tickers(text: str) -> list[str]:
    """Tickers a tool said it does not know, in order, without repeats."""
    return list(dict.fromkeys(_UNKNOWN.findall(text)))


def numbers(text: str) -> set[float]:
    """The figures in a text, normalised ("1,234.50" and "1234.5" are the same)."""
    return {float(m.replace(",", "")) for m in NUMBER.findall(text)}


def unsupported_numbers(draft: str, evidence: str) -> list[str]:
    """Figures in the draft that appear nowhere in the evidence, as written in the draft."""
    known = numbers(evidence)
    out = [m for m in NUMBER.findall(draft) if float(m.replace(",", "")) not in known]
    return list(dict.fromkeys(out))


def describe(obj: dict[str, Any]) -> list[str]:
    """Findings stated from one tool output. Lines starting "Strength:" or "Risk:" are
    judgements; every figure is copied as the tool wrote it."""
    if "market_cap_b" in obj and "price" in obj:
        return _snapshot(obj)
    if "closes" in obj:
        return _history(obj)
    if "articles" in obj:
        return _news(obj)
    if "peers" in obj:
        return _peers(obj)
    if "fiscal_years" in obj:
        return _financials(obj)
    return []


def _snapshot(s: dict[str, Any]) -> list[str]:
    t = s["ticker"]
    lines = [
        f"{t} ({s['name']}, {s['industry']}) last closed at {s['price']} USD, "
        f"a day change of {s['day_change_pct']}%.",
        f"{t} market cap is {s['market_cap_b']} billion USD.",
        f"{t} one-year range is {s['week52_low']} to {s['week52_high']} USD.",
    ]
    if s["pe_ratio"] is None:
        lines.append(f"Risk: {t} has no P/E because its EPS is {s['eps']} (a loss).")
    else:
        lines.append(f"{t} trades at a P/E of {s['pe_ratio']} on EPS of {s['eps']}.")
        if s["pe_ratio"] > 40:
            lines.append(f"Risk: {t} valuation is demanding (P/E {s['pe_ratio']}).")
    if s["price"] >= 0.97 * s["week52_high"]:
        lines.append(f"Strength: {t} trades near the top of its one-year range.")
    elif s["price"] <= 1.05 * s["week52_low"]:
        lines.append(f"Risk: {t} trades near the bottom of its one-year range.")
    return lines


def _history(h: dict[str, Any]) -> list[str]:
    return [
        f"{h['ticker']} over the last {h['days']} trading days ({h['start_date']} to "
        f"{h['end_date']}) moved from {h['start_close']} to {h['end_close']} USD "
        f"({h['change_pct']}%), between {h['low']} and {h['high']}."
    ]


def _news(n: dict[str, Any]) -> list[str]:
    label = {"positive": "Strength", "negative": "Risk"}
    lines = []
    for a in n["articles"]:
        lines.append(f"{n['ticker']} news, {a['date']}: {a['headline']} ({a['sentiment']}).")
        if a["sentiment"] in label:
            lines.append(f"{label[a['sentiment']]}: {a['headline']} ({n['ticker']}).")
    return lines


def _peers(p: dict[str, Any]) -> list[str]:
    lines = []
    for peer in p["peers"]:
        pe = f"P/E {peer['pe_ratio']}" if peer["pe_ratio"] is not None else "no P/E (a loss)"
        lines.append(
            f"{p['ticker']} competitor {peer['ticker']} ({peer['name']}): market cap "
            f"{peer['market_cap_b']} billion USD, {pe}, revenue growth "
            f"{peer['revenue_growth_pct']}%, operating margin {peer['operating_margin_pct']}%."
        )
    return lines


def _financials(f: dict[str, Any]) -> list[str]:
    t, latest = f["ticker"], f["fiscal_years"][0]
    revenues = " then ".join(str(y["revenue_b"]) for y in reversed(f["fiscal_years"]))
    lines = [
        f"{t} fiscal {latest['fiscal_year']} revenue was {latest['revenue_b']} billion USD "
        f"(growth {f['revenue_growth_pct']}%), net income {latest['net_income_b']} billion, "
        f"EPS {latest['eps']}, free cash flow {latest['free_cash_flow_b']} billion.",
        f"{t} revenue over the three fiscal years on file: {revenues} billion USD.",
        f"{t} margins: gross {f['gross_margin_pct']}%, operating "
        f"{f['operating_margin_pct']}%, net {f['net_margin_pct']}%.",
        f"{t} balance sheet: cash {f['cash_b']} billion, debt {f['debt_b']} billion, "
        f"net cash {f['net_cash_b']} billion USD.",
    ]
    growth = f["revenue_growth_pct"]
    if growth >= 10:
        lines.append(f"Strength: {t} revenue is growing fast ({growth}%).")
    elif growth < 0:
        lines.append(f"Risk: {t} revenue is shrinking ({growth}%).")
    if f["operating_margin_pct"] < 0:
        lines.append(f"Risk: {t} loses money at the operating level.")
    elif f["operating_margin_pct"] >= 30:
        lines.append(f"Strength: {t} has high operating margins.")
    if f["net_cash_b"] < 0:
        lines.append(f"Risk: {t} carries more debt than cash (net {f['net_cash_b']} billion).")
    return lines
