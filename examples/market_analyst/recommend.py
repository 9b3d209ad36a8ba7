"""What the offline demo model answers in the judging roles: the replanner, the report (the
research loop's typed answer, from the ReWOO solver's or the reporter's prompt), the
evaluator and the trader, each by rules on the text it is sent.

The report's figures are copied from the evidence in its prompt and cite it by id: a flash
briefing's tool outputs (#E1 as "E1"), or a deep research step's findings (step 2 as "S2");
its recommendation weighs the strengths and risks the evidence shows, and the investor's
risk tolerance. The evaluator checks every figure in the draft, and each key figure
against the evidence it cites.
"""

from __future__ import annotations

import re
from typing import Any

from market_analyst.facts import (
    NUMBER,
    describe,
    json_objects,
    numbers,
    unknown_tickers,
    unsupported_numbers,
)
from market_analyst.tickers import tickers_in
from market_analyst.writers import wants_analysis

_SOLVER_STEP = re.compile(
    r"^#(E\d+): [^\n]*\ncall: \w+\([^\n]*\)\nstatus: (\w+)[^\n]*\n(.*?)(?=\n\n#E\d+: |\Z)",
    re.M | re.S,
)
_REPORT_STEP = re.compile(r"^Step (\d+) \[\w+\]: [^\n]*\n(.*?)(?=\n\nStep \d+ \[|\Z)", re.M | re.S)
_FINDING = re.compile(r"^- (.+)$", re.M)
_FIGURE_ROW = re.compile(r"^\| (.+?) \| (.+?) \| ([ES]\d+)\b.*\|$", re.M)
_NOT_KNOWN = re.compile(r"do not know the ticker '([^']*)'")
_STATED = (  # (pattern over one finding, label, unit): the figures a finding states
    (r"^(\w+) \(.*?\) last closed at ([-\d.]+) USD", "{} last close", "USD"),
    (r"a day change of ([-\d.]+)%", "{} day change", "%"),
    (r"^(\w+) market cap is ([-\d.]+) billion USD", "{} market cap", "billion USD"),
    (r"^(\w+) trades at a P/E of ([-\d.]+)", "{} P/E", ""),
    (
        r"^(\w+) over the last (\d+) trading days .*? USD \(([-\d.]+)%\)",
        "{} change over {} trading days",
        "%",
    ),
    (
        r"^(\w+) fiscal (\d+) revenue was ([-\d.]+) billion USD",
        "{} fiscal {} revenue",
        "billion USD",
    ),
    (r"\(growth ([-\d.]+)%\)", "{} revenue growth", "%"),
    (r"^(\w+) margins: gross [-\d.]+%, operating ([-\d.]+)%", "{} operating margin", "%"),
)


def revision(prompt: str) -> dict[str, Any]:
    """Keep the plan, unless the findings so far show the tools know none of the tickers:
    then the remaining steps would fail the same way, so drop them."""
    findings = prompt.split("Findings so far:", 1)[-1].split("Remaining steps:", 1)[0]
    # Each finding is a "- " line; a step's first one follows its "Step N (...): " label.
    found = re.findall(r"^(?:Step \d+ \(.*?\): )?- (.+)$", findings, re.M)
    if found and all(f.startswith("Data problem:") for f in found):
        return {
            "revise": True,
            "steps": [],
            "reason": "the tools know none of the tickers named; the remaining steps would "
            "fail the same way",
        }
    return {"revise": False, "steps": [], "reason": "the plan still fits the findings"}


def _figures(source: str, obj: dict[str, Any]) -> list[dict[str, str]]:
    """The key figures one tool output gives, each citing it."""
    t = obj["ticker"]
    rows: list[tuple[str, Any, str]] = []
    if "market_cap_b" in obj and "price" in obj:
        rows += [
            (f"{t} last close", obj["price"], "USD"),
            (f"{t} day change", obj["day_change_pct"], "%"),
            (f"{t} market cap", obj["market_cap_b"], "billion USD"),
        ]
        if obj["pe_ratio"] is not None:
            rows.append((f"{t} P/E", obj["pe_ratio"], ""))
    elif "closes" in obj:
        rows.append((f"{t} change over {obj['days']} trading days", obj["change_pct"], "%"))
    elif "fiscal_years" in obj:
        latest = obj["fiscal_years"][0]
        rows += [
            (f"{t} fiscal {latest['fiscal_year']} revenue", latest["revenue_b"], "billion USD"),
            (f"{t} revenue growth", obj["revenue_growth_pct"], "%"),
            (f"{t} operating margin", obj["operating_margin_pct"], "%"),
        ]
    return [{"label": a, "value": str(v), "unit": u, "source": source} for a, v, u in rows]


def _recommend(strengths: int, risks: int, tolerance: str) -> tuple[str, str]:
    """(recommendation, why) from the balance of strengths and risks."""
    score = strengths - risks
    if score >= 2 and risks and tolerance == "low":
        return "hold", "the case leans positive, but risks remain for a low risk tolerance"
    if score >= 2:
        return "buy", "the strengths clearly outweigh the risks"
    if score <= -2:
        return "sell", "the risks clearly outweigh the strengths"
    return "hold", "strengths and risks are about even"


def _stated(source: str, finding: str) -> list[dict[str, str]]:
    """The key figures one research finding states, citing its step."""
    ticker = finding.split(" ", 1)[0]
    rows = []
    for pattern, label, unit in _STATED:
        found = re.search(pattern, finding)
        if found:
            *named, value = found.groups()
            names = named or [ticker]
            rows.append(
                {"label": label.format(*names), "value": value, "unit": unit, "source": source}
            )
    return rows


def evidence_in(prompt: str) -> tuple[list[dict[str, str]], list[str]]:
    """The key figures and the findings the evidence in a prompt gives: a ReWOO solver's
    tool outputs (cited E1, E2, ...), or a Plan-and-Execute reporter's step results (S1,
    S2, ...)."""
    figures: list[dict[str, str]] = []
    lines: list[str] = []
    for source, status, body in _SOLVER_STEP.findall(prompt):
        for obj in json_objects(body) if status == "ok" else []:
            figures += _figures(source, obj)
            lines += describe(obj)
    for number, body in _REPORT_STEP.findall(prompt):
        for finding in _FINDING.findall(body):
            figures += _stated(f"S{number}", finding)
            lines.append(finding)
    return figures, list(dict.fromkeys(lines))


def report(task: str, prompt: str, memory: str) -> dict[str, Any]:
    """The structured report for `task` from the evidence in the answering role's prompt and
    the investor's memory block."""
    figures, lines = evidence_in(prompt)
    strengths = [x.removeprefix("Strength: ") for x in lines if x.startswith("Strength:")]
    risks = [x.removeprefix("Risk: ") for x in lines if x.startswith("Risk:")]
    who = ", ".join(tickers_in(task)) or "the request"
    missing = list(dict.fromkeys(unknown_tickers(prompt) + _NOT_KNOWN.findall(prompt)))
    tolerance = re.search(r"Risk tolerance: (\w+)", memory)
    rec, why = _recommend(len(strengths), len(risks), tolerance.group(1) if tolerance else "")
    if not figures:
        rec, why = "hold", "the tools returned no data to judge by"
    thesis = f"{who}: {why}." + "".join(f" {s.rstrip('.')}." for s in strengths)
    held = re.search(r"Holdings: (.*?)\.(?: |$)", memory)
    for ticker in tickers_in(task):
        if held and re.search(rf"\b{ticker} \d", held.group(1)):
            thesis += f" You already hold {ticker}."
    if missing:
        risks.append(f"The tools do not know {', '.join(missing)}: no figures for it.")
    deep = bool(wants_analysis(task)) or any("fiscal" in f["label"] for f in figures)
    last = re.search(r"published (\S+), recommended (\w+)", memory)
    changed = ""
    if last:
        again = " again" if last.group(2) == rec else ""
        changed = (
            f"The last report ({last.group(1)}) recommended {last.group(2)}; "
            f"this one recommends {rec}{again}."
        )
    confidence = "low" if missing or not figures else "high" if deep else "medium"
    return {
        "title": f"{'Investment thesis and strategic risks' if deep else 'Briefing'}: {who}",
        "tickers": tickers_in(task),
        "recommendation": rec,
        "confidence": confidence,
        "thesis": thesis,
        "risks": risks,
        "key_figures": figures,
        "what_changed": changed,
    }


def verdict(draft: str, evidence: str) -> dict[str, Any]:
    """Fail on figures the evidence does not hold (and key figures their cited evidence does
    not hold: a research step's are all its tool outputs); a human decides when data was
    missing."""
    cited: dict[str, str] = {}
    for i, line in re.findall(r"^\[([ES][\d.]+)\] (.*)$", evidence, re.M):
        cited[i] = line
        if "." in i:
            step = i.split(".")[0]
            cited[step] = f"{cited.get(step, '')} {line}"
    miscited = [
        f"{label.strip()} = {value.strip()} (cites {source})"
        for label, value, source in _FIGURE_ROW.findall(draft)
        if not numbers(value) or not numbers(value) <= numbers(cited.get(source, ""))
    ]
    if miscited:
        return {
            "verdict": "fail",
            "reasons": [f"key figures not in the tool output they cite: {'; '.join(miscited)}"],
        }
    invented = unsupported_numbers(draft, evidence)
    unknown = unknown_tickers(evidence)
    if invented:
        shown = ", ".join(invented[:6]) + (" ..." if len(invented) > 6 else "")
        return {
            "verdict": "fail",
            "reasons": [f"the draft states figures found in no tool output: {shown}"],
        }
    if unknown:
        return {
            "verdict": "needs_human",
            "reasons": [
                f"a tool reported an unknown ticker: {', '.join(unknown)}; "
                "the draft cannot be checked for it, so a person should decide"
            ],
        }
    if not draft.strip():
        return {
            "verdict": "fail",
            "reasons": ["the draft is empty: it does not answer the request"],
        }
    if not json_objects(evidence):
        return {"verdict": "needs_human", "reasons": ["no tool output to check the draft against"]}
    checked = len(set(NUMBER.findall(draft)))
    return {
        "verdict": "pass",
        "reasons": [
            f"all {checked} distinct figures in the draft appear in the tool outputs",
            "no tool reported an error",
        ],
    }


def trade(prompt: str, made: list[tuple[str, dict[str, Any], str]]) -> tuple[str, Any]:
    """The trader's next move: `("call", (tool, args))` or `("say", text)`.

    `made` is the calls so far with their results. It looks up the price, then proposes
    one trade: a buy of the budget's worth (default: the investor's unasked limit), or a
    sale of the budget's worth (default: every share held); then it says what happened.
    """
    ticker = (re.findall(r"^Tickers: (\w+)", prompt, re.M) or ["?"])[0]
    side = (re.findall(r"^Recommendation: (\w+)", prompt, re.M) or ["hold"])[0]
    results = {name: result for name, _args, result in made}
    if "execute_trade" in results:
        outcome = results["execute_trade"]
        if outcome.startswith("denied"):
            return "say", (
                f"No trade: the {side} of {ticker} was refused by the trade guardian or "
                "denied by a person, so nothing was recorded."
            )
        entry = json_objects(outcome)
        if not entry:
            return "say", f"No trade: the ledger did not take it ({outcome[:200]})."
        e = entry[0]
        return "say", (
            f"Recorded a simulated {e['side']} of {e['quantity']} {e['ticker']} at "
            f"{e['price']} USD ({e['value_usd']} USD), approved by {e['approved_by']}."
        )
    if "get_stock_snapshot" not in results:
        return "call", ("get_stock_snapshot", {"ticker": ticker})
    quotes = json_objects(results["get_stock_snapshot"])
    if not quotes:
        return "say", f"No trade: no price for {ticker}."
    price = float(quotes[0]["price"])
    budget = re.search(r"^About ([\d,.]+) USD", prompt, re.M)
    limit = re.search(r"Trades worth up to ([\d,.]+) USD", prompt)
    held = re.search(rf"\b{ticker} ([\d.]+) shares", prompt)
    if budget:
        quantity = int(float(budget.group(1).replace(",", "")) // price)
    elif side == "sell":
        quantity = int(float(held.group(1))) if held else 0
    else:
        quantity = int(float(limit.group(1).replace(",", "")) // price) if limit else 1
    if side not in ("buy", "sell") or quantity < 1:
        why = (
            "the report recommends no trade"
            if side not in ("buy", "sell")
            else (
                f"no whole share of {ticker} fits at {price} USD"
                if side == "buy" or budget
                else f"you hold no {ticker}"
            )
        )
        return "say", f"No trade: {why}."
    return "call", ("execute_trade", {"ticker": ticker, "side": side, "quantity": quantity})
