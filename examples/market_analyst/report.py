"""The structured draft: the record the writer fills, its Markdown, and the figure check.

The writer model fills `AnalystReport` through structured output (`ask_structured`), so
the recommendation is one of three words and every key figure names the tool output it
came from (an evidence id such as "E3"). `unsupported_figures` checks each figure against
that output in code; the evaluator model checks the rendered Markdown as well.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Literal

import pydantic

from market_analyst.facts import numbers

Recommendation = Literal["buy", "hold", "sell"]


class KeyFigure(pydantic.BaseModel):
    """One figure the report relies on, and where it came from."""

    # Models often write a figure as a JSON number: keep it, as text, rather than re-ask.
    model_config = pydantic.ConfigDict(coerce_numbers_to_str=True)

    label: str = pydantic.Field(description="what the figure is, e.g. 'NVDA last close'")
    value: str = pydantic.Field(
        description="the figure exactly as the tool output states it, e.g. '157.99'"
    )
    unit: str = pydantic.Field(default="", description="e.g. 'USD', '%', 'billion USD'")
    source: str = pydantic.Field(
        description="the id of the tool output the figure is copied from, e.g. 'E1'"
    )


class AnalystReport(pydantic.BaseModel):
    """The draft the writer fills; rendered to Markdown for the evaluator and a person."""

    title: str = pydantic.Field(description="a short title naming the tickers")
    tickers: list[str] = pydantic.Field(description="the ticker symbols the report covers")
    recommendation: Recommendation = pydantic.Field(description="buy, hold or sell")
    confidence: Literal["low", "medium", "high"] = pydantic.Field(
        description="low when data is missing or the signals conflict"
    )
    thesis: str = pydantic.Field(description="the case for the recommendation, a paragraph")
    risks: list[str] = pydantic.Field(description="the main risks, one sentence each")
    key_figures: list[KeyFigure] = pydantic.Field(
        description="the figures the thesis rests on, each copied from one tool output"
    )
    what_changed: str = pydantic.Field(
        default="",
        description="what changed since the last published report on these tickers "
        "(empty when there is none)",
    )


def evidence_id(index: int) -> str:
    """The id of the `index`-th tool output (0-based) in prompts and citations: E1, E2..."""
    return f"E{index + 1}"


def evidence_lines(evidence: list[dict[str, Any]]) -> dict[str, str]:
    """Tool outputs by evidence id, one line each, as the writer and evaluator see them."""
    out = {}
    for i, e in enumerate(evidence):
        args = json.dumps(e["args"], sort_keys=True)
        mark = "ERROR " if e["is_error"] else ""
        out[evidence_id(i)] = f"{e['name']}({args}) -> {mark}{e['content']}"
    return out


def unsupported_figures(report: AnalystReport, evidence: list[dict[str, Any]]) -> list[str]:
    """Every key figure that its cited tool output does not hold, as a sentence."""
    by_id = {evidence_id(i): e for i, e in enumerate(evidence)}
    problems = []
    for f in report.key_figures:
        name = f"{f.label!r} = {f.value!r}"
        cited = by_id.get(f.source.strip().upper())
        if cited is None:
            problems.append(f"{name} cites {f.source!r}, which is no tool output of this run")
        elif cited["is_error"]:
            problems.append(f"{name} cites {f.source}, a tool call that failed")
        elif not numbers(f.value):
            problems.append(f"{name} holds no figure")
        elif not numbers(f.value) <= numbers(cited["content"]):
            problems.append(f"{name} is not in {f.source} ({cited['name']})")
    return problems


_INLINE = re.compile(r"([\\`*_\[\]|~])")
# What starts a block at the beginning of a line: a heading, a list item, a rule. A "1."
# marker is escaped at its dot ("1\."), the others before their first character. ("*" and
# "<" never get here unescaped.)
_BLOCK_START = re.compile(r"^(?:(\d+)(?=[.)](?:\s|$))|(?=#{1,6}(?:\s|$)|\+(?:\s|$)|-(?:[\s-]|$)))")


def md_inline(text: str) -> str:
    """Text that Markdown shows as written: one line (a newline could start a forged
    heading), HTML escaped, and link, emphasis, code and table syntax backslash-escaped.
    Digits and dots stay as they are, so figures still read (and check) as figures."""
    line = " ".join(str(text).split())
    line = _INLINE.sub(r"\\\1", html.escape(line, quote=False))
    return _BLOCK_START.sub(lambda m: (m.group(1) or "") + "\\", line, count=1)


def to_markdown(report: AnalystReport, sources: dict[str, str] | None = None) -> str:
    """The report as Markdown. Every model-written field is escaped (`md_inline`).

    Args:
        report: the filled record.
        sources: evidence id to a short description ("get_stock_snapshot NVDA"), shown
            beside each figure's id.
    """
    sources = sources or {}
    rows = [
        f"| {md_inline(f.label)} | {md_inline(f.value)} {md_inline(f.unit)} | "
        f"{md_inline(f.source)} {md_inline(sources.get(f.source.strip().upper(), ''))} |"
        for f in report.key_figures
    ]
    risks = [f"- {md_inline(r)}" for r in report.risks] or ["- None stated."]
    parts = [
        f"## {md_inline(report.title)}",
        f"**Recommendation: {report.recommendation.upper()}** (confidence: {report.confidence})",
    ]
    if report.what_changed.strip():
        parts.append(f"**Since the last report:** {md_inline(report.what_changed)}")
    parts += [
        f"### Thesis\n\n{md_inline(report.thesis)}",
        "### Risks\n\n" + "\n".join(risks),
        "### Key figures\n\n| Figure | Value | Source |\n|---|---|---|\n"
        + ("\n".join(rows) or "| (none) | | |"),
    ]
    return "\n\n".join(parts) + "\n"


def source_names(evidence: list[dict[str, Any]]) -> dict[str, str]:
    """Evidence id to "tool TICKER", for the key-figure table."""
    return {
        evidence_id(i): f"({e['name']} {e['args'].get('ticker', '')})".replace(" )", ")")
        for i, e in enumerate(evidence)
    }
