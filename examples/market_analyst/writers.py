"""What the offline demo model answers in the research roles, computed from the text it
is sent.

Plain functions from request text to an answer: routes and plans from the user's words
(and the investor's horizon), briefings and reports from the tool outputs in the prompt.
Nothing here knows a market figure by itself. The structured report and the verdict are
in `recommend`.
"""

from __future__ import annotations

import re
from typing import Any

from market_analyst import data
from market_analyst.facts import describe, json_objects, unknown_tickers
from market_analyst.prompts import DEEP, FLASH
from market_analyst.tickers import tickers_in

__all__ = ["DEEP", "FLASH", "tickers_in"]  # re-exported for the loop comparison

_FLASH_WORDS = ("snapshot", "quick", "quote", "price", "brief", "how is", "today")
_DEEP_WORDS = ("thesis", "risk", "analy", "deep", "research", "outlook", "invest", "compare")
_STEP_TOOLS = (
    ("snapshot", "get_stock_snapshot"),
    ("price history", "get_price_history"),
    ("financial", "get_financials"),
    ("competitor", "search_competitors"),
    ("news", "search_news"),
)
_DEEP_ONLY = {"get_financials", "search_competitors"}
_HISTORY_DAYS = {"short": 30, "medium": 90, "long": 252}
"""Days of price history a deep plan asks for, by the investor's horizon."""


def wants_analysis(task: str) -> list[str]:
    """The words in `task` that ask for analysis (a thesis, risks, a comparison...)."""
    text = task.lower()
    return [w for w in _DEEP_WORDS if w in text]


def horizon_in(memory: str) -> str:
    """The investor's horizon from a memory block ("medium" when none is given)."""
    found = re.search(r"Horizon: (short|medium|long)", memory)
    return found.group(1) if found else "medium"


def route(task: str, *, unclear: str = FLASH) -> dict[str, str]:
    """Deep research when the request asks for analysis, a flash briefing when it clearly
    asks for a quick look, and the `unclear` route (the one the router's prompt names
    for unclear requests) when it asks for neither."""
    deep = wants_analysis(task)
    if deep:
        return {
            "route": DEEP,
            "reasoning": f"The request asks for analysis ({', '.join(deep)}): several steps "
            "that each need to see their tool results, so Plan-and-Execute.",
        }
    text = task.lower()
    flash = [w for w in _FLASH_WORDS if w in text]
    if flash or unclear == FLASH:
        why = f"({', '.join(flash)})" if flash else "(no analysis asked for)"
        return {
            "route": FLASH,
            "reasoning": f"A quick factual look {why}: the look-ups are known up front and "
            "independent, so ReWOO plans them once and runs them in parallel.",
        }
    return {
        "route": unclear,
        "reasoning": "The request does not say whether it wants a quick look or analysis; "
        f"unclear requests go to {unclear}.",
    }


def rewoo_plan(task: str, memory: str = "") -> dict[str, Any]:
    """Every look-up the request needs, per ticker, none waiting for another: a snapshot,
    a month of prices (a year for a long horizon) and the news, plus financials and
    competitors for an analysis."""
    deep = bool(wants_analysis(task))
    days = 252 if horizon_in(memory) == "long" else 21
    steps: list[dict[str, Any]] = []
    for ticker in tickers_in(task) or ["(none named)"]:
        for name, what, args in (
            ("get_stock_snapshot", "Current snapshot", {}),
            ("get_price_history", f"Price history, last {days} trading days,", {"days": days}),
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


def deep_plan(task: str, memory: str = "") -> dict[str, Any]:
    """Four research steps, each naming the look-ups it needs, for the companies named.
    The price history's length follows the investor's horizon; a last report on these
    tickers is named in the first step, so the findings can be compared with it."""
    who = " and ".join(tickers_in(task)) or "(none named)"
    days = _HISTORY_DAYS[horizon_in(memory)]
    last = re.search(r"published (\S+), recommended (\w+)", memory)
    since = f" (the last report, {last.group(1)}, recommended {last.group(2)})" if last else ""
    steps = [
        (f"Get the snapshot and {days}-day price history of {who}{since}", "get_stock_snapshot"),
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
        deep = bool(wants_analysis(task or step_text))
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
    deep = bool(wants_analysis(task))
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
    if not wants_analysis(task):
        return flash_briefing(task, tool_outputs)
    return deep_report(task, "\n".join(f"- {x}" for x in findings(tool_outputs)))
