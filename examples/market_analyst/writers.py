"""What the offline demo model answers in each role, computed from the text it is sent.

Plain functions from request text to an answer: routes and plans from the user's
words, briefings and reports from the tool outputs in the prompt, verdicts by checking
the draft's figures against the evidence. Nothing here knows a market figure by itself.
"""

from __future__ import annotations

import re
from typing import Any

from market_analyst import data
from market_analyst.facts import (
    NUMBER,
    describe,
    json_objects,
    unknown_tickers,
    unsupported_numbers,
)

FLASH, DEEP = "flash_briefing", "deep_research"
_FLASH_WORDS = ("snapshot", "quick", "quote", "price", "brief", "how is", "today")
_DEEP_WORDS = ("thesis", "risk", "analy", "deep", "research", "outlook", "invest", "compare")
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
_STEP_TOOLS = (
    ("snapshot", "get_stock_snapshot"),
    ("price history", "get_price_history"),
    ("financial", "get_financials"),
    ("competitor", "search_competitors"),
    ("news", "search_news"),
)
_DEEP_ONLY = {"get_financials", "search_competitors"}


def tickers_in(task: str) -> list[str]:
    """Tickers the user named: symbols (known or not, so a typo reaches the tools and
    fails there) and known company names; at most three, in order."""
    found: list[str] = []
    for word in re.findall(r"[A-Za-z][A-Za-z.&-]*", task):
        symbol = word.strip(".")
        if symbol.isupper() and 1 <= len(symbol) <= 5 and symbol not in _NOT_TICKERS:
            found.append(symbol)
        elif word.lower().strip(".") in _NAMES:
            found.append(_NAMES[word.lower().strip(".")])
    return list(dict.fromkeys(found))[:3]


def route(task: str) -> dict[str, str]:
    """Deep research when the request asks for analysis, a flash briefing for a quick look."""
    text = task.lower()
    deep = [w for w in _DEEP_WORDS if w in text]
    if deep:
        return {
            "route": DEEP,
            "reasoning": f"The request asks for analysis ({', '.join(deep)}): several steps "
            "that each need to see their tool results, so Plan-and-Execute.",
        }
    flash = [w for w in _FLASH_WORDS if w in text]
    why = f"({', '.join(flash)})" if flash else "(no analysis asked for)"
    return {
        "route": FLASH,
        "reasoning": f"A quick factual look {why}: the look-ups are known up front and "
        "independent, so ReWOO plans them once and runs them in parallel.",
    }


def rewoo_plan(task: str) -> dict[str, Any]:
    """Every look-up the request needs, per ticker, none waiting for another: a snapshot,
    a month of prices and the news, plus financials and competitors for an analysis."""
    deep = route(task)["route"] == DEEP
    steps: list[dict[str, Any]] = []
    for ticker in tickers_in(task) or ["(none named)"]:
        for name, what, args in (
            ("get_stock_snapshot", "Current snapshot", {}),
            ("get_price_history", "Price history, last month,", {"days": 21}),
            ("search_news", "Latest news", {"limit": 3}),
            ("get_financials", "Financials", {}),
            ("search_competitors", "Competitors", {}),
        ):
            if name in _DEEP_ONLY and not deep:
                continue
            steps.append(
                {
                    "step_id": f"#E{len(steps) + 1}",
                    "description": f"{what} of {ticker}",
                    "tool_name": name,
                    "tool_args": {"ticker": ticker, **args},
                    "depends_on": [],
                }
            )
    return {"steps": steps}


def deep_plan(task: str) -> dict[str, Any]:
    """Four research steps, each naming the look-ups it needs, for the companies named."""
    who = " and ".join(tickers_in(task)) or "(none named)"
    steps = [
        (f"Get the snapshot and 90-day price history of {who}", "get_stock_snapshot"),
        (f"Review the financials of {who} over three fiscal years", "get_financials"),
        (f"Compare {who} with competitors", "search_competitors"),
        (f"Scan recent news on {who} for strategic risks", "search_news"),
    ]
    return {
        "steps": [
            {"step_number": i, "description": d, "tool_hint": hint}
            for i, (d, hint) in enumerate(steps, 1)
        ]
    }


def step_calls(step_text: str, task: str = "") -> list[tuple[str, dict[str, Any]]]:
    """The look-ups a step asks for, read from the step's own text, for every ticker it
    names. A text naming no look-up (a ReAct agent given the whole task) gets every
    look-up its route would make."""
    text = step_text.lower()
    names = [name for word, name in _STEP_TOOLS if word in text]
    if not names:
        deep = route(task or step_text)["route"] == DEEP
        names = [n for _, n in _STEP_TOOLS if deep or n not in _DEEP_ONLY]
    days = re.search(r"(\d+)-day", text)
    calls: list[tuple[str, dict[str, Any]]] = []
    for ticker in tickers_in(step_text) or tickers_in(task) or ["(none named)"]:
        for name in names:
            args: dict[str, Any] = {"ticker": ticker}
            if name == "get_price_history":
                args["days"] = int(days.group(1)) if days else 30
            calls.append((name, args))
    return calls


def findings(evidence: str) -> list[str]:
    """Every finding stated from the tool outputs (and tool errors) in `evidence`."""
    lines = [line for obj in json_objects(evidence) for line in describe(obj)]
    for ticker in unknown_tickers(evidence):
        lines.append(
            f"Data problem: the tools do not know the ticker {ticker!r} "
            f"(known tickers: {', '.join(data.TICKERS)}); no figures for it."
        )
    return list(dict.fromkeys(lines))


def flash_briefing(task: str, evidence: str) -> str:
    """A short briefing from the evidence only."""
    lines = findings(evidence)
    title = ", ".join(tickers_in(task)) or "the request"
    if not lines:
        return f"## Flash briefing: {title}\n\nThe tools returned nothing usable; no figures."
    facts = [x for x in lines if not x.startswith(("Strength:", "Risk:"))]
    watch = [x for x in lines if x.startswith(("Strength:", "Risk:"))]
    body = "\n".join(f"- {x}" for x in facts)
    notes = "\n".join(f"- {x}" for x in watch) or "- Nothing stands out."
    return f"## Flash briefing: {title}\n\n{body}\n\n**Worth watching**\n\n{notes}\n"


def deep_report(task: str, step_results: str) -> str:
    """An investment thesis with strategic risks, arranged from the steps' findings."""
    lines = [m.strip() for m in re.findall(r"^- (.+)$", step_results, re.M)]
    lines = list(dict.fromkeys(lines))
    strengths = [x.removeprefix("Strength: ") for x in lines if x.startswith("Strength:")]
    risks = [x.removeprefix("Risk: ") for x in lines if x.startswith("Risk:")]
    problems = [x for x in lines if x.startswith("Data problem:")]
    facts = [x for x in lines if x not in problems and not x.startswith(("Strength:", "Risk:"))]
    who = ", ".join(tickers_in(task)) or "the request"
    deep = route(task)["route"] == DEEP
    title = f"Investment thesis and strategic risks: {who}" if deep else f"Research notes: {who}"
    lean = (
        "leans positive"
        if len(strengths) > len(risks)
        else "leans negative"
        if len(risks) > len(strengths)
        else "is balanced"
    )
    if problems and not facts:
        lean = "cannot be judged: the data is missing"

    def section(heading: str, items: list[str]) -> str:
        return f"### {heading}\n\n" + ("\n".join(f"- {x}" for x in items) or "- None found.")

    return "\n\n".join(
        [
            f"## {title}",
            section("What the data says", facts),
            section("Thesis: strengths", strengths),
            section("Strategic risks", risks),
            *([section("Data problems", problems)] if problems else []),
            f"### Bottom line\n\nOn the fixture data, the case {lean}.",
        ]
    )


def draft(task: str, tool_outputs: str) -> str:
    """A whole draft from tool outputs, shaped by the route the request would take."""
    if route(task)["route"] == FLASH:
        return flash_briefing(task, tool_outputs)
    return deep_report(task, "\n".join(f"- {x}" for x in findings(tool_outputs)))


def verdict(draft: str, evidence: str) -> dict[str, Any]:
    """Fail on figures the evidence does not hold; a human decides when data was missing."""
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
