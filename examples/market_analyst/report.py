"""The structured draft: the record the research loop's final answer fills, its Markdown,
and the figure check.

The research loop has `output_type=AnalystReport` (the ReWOO solver, or the Plan-and-Execute
reporter, fills it), so the recommendation is one of three words and every key figure names
the evidence it came from: a tool output ("E3", a ReWOO step) or a research step ("S2", whose
tool outputs hold it). `unsupported_figures` checks each figure against that evidence in
code, as the loop's `output_validator` and again on the draft; the evaluator model checks
the rendered Markdown as well.
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
        description="where the figure is copied from: the tool output's id (E1, E2, ...) "
        "or the research step's (S1, S2, ...), e.g. 'E1'"
    )


class AnalystReport(pydantic.BaseModel):
    """The report the research loop's final answer fills, rendered to Markdown."""

    title: str = pydantic.Field(description="a short title naming the tickers")
    tickers: list[str] = pydantic.Field(description="the ticker symbols the report covers")
    recommendation: Recommendation = pydantic.Field(description="buy, hold or sell")
    confidence: Literal["low", "medium", "high"] = pydantic.Field(
        description="low when data is missing or the signals conflict"
    )
    thesis: str = pydantic.Field(description="the case for the recommendation, a paragraph")
    risks: list[str] = pydantic.Field(description="the main risks, one sentence each")
    key_figures: list[KeyFigure] = pydantic.Field(
        description="the figures the thesis rests on, each copied from the evidence it cites"
    )
    what_changed: str = pydantic.Field(
        default="",
        description="what changed since the last published report on these tickers "
        "(empty when there is none)",
    )


def evidence_id(e: dict[str, Any], index: int) -> str:
    """The id of a piece of evidence in prompts and citations: the one it was given ("E3" for
    a ReWOO step, "S2.1" for the first tool output of research step 2), or, in a record
    written before evidence had ids, its position (E1, E2, ...)."""
    return str(e.get("id") or f"E{index + 1}")


def evidence_lines(evidence: list[dict[str, Any]]) -> dict[str, str]:
    """Tool outputs by evidence id, one line each, as the evaluator sees them."""
    out = {}
    for i, e in enumerate(evidence):
        args = json.dumps(e["args"], sort_keys=True)
        mark = "ERROR " if e["is_error"] else ""
        out[evidence_id(e, i)] = f"{e['name']}({args}) -> {mark}{e['content']}"
    return out


def cited_id(source: str) -> str:
    """A citation as an evidence id: "#E3" and "e3" are "E3", "step 2" is "S2"."""
    text = source.strip().upper().lstrip("#")
    step = re.fullmatch(r"STEP\s*(\d+)", text)
    return f"S{step.group(1)}" if step else text


def unsupported_figures(report: AnalystReport, evidence: list[dict[str, Any]]) -> list[str]:
    """Every key figure that the evidence it cites does not hold, as a sentence. A research
    step ("S2") holds what any of its tool outputs ("S2.1", "S2.2") holds."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for i, e in enumerate(evidence):
        key = evidence_id(e, i)
        by_id.setdefault(key, []).append(e)
        if "." in key:
            by_id.setdefault(key.split(".")[0], []).append(e)
    problems = []
    for f in report.key_figures:
        name = f"{f.label!r} = {f.value!r}"
        cited = by_id.get(cited_id(f.source), [])
        held = [e for e in cited if not e["is_error"]]
        if not cited:
            problems.append(f"{name} cites {f.source!r}, which is no evidence of this run")
        elif not held:
            problems.append(f"{name} cites {f.source}, a tool call that failed")
        elif not numbers(f.value):
            problems.append(f"{name} holds no figure")
        elif not any(numbers(f.value) <= numbers(e["content"]) for e in held):
            tools = ", ".join(dict.fromkeys(e["name"] for e in held))
            problems.append(f"{name} is not in {f.source} ({tools})")
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
        f"{md_inline(f.source)} {md_inline(sources.get(cited_id(f.source), ''))} |"
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
    """Evidence id to "(tool TICKER)", for the key-figure table; a research step's id to
    the tools it ran ("(get_financials, search_news MSFT)")."""
    names: dict[str, str] = {}
    steps: dict[str, list[dict[str, Any]]] = {}
    for i, e in enumerate(evidence):
        key = evidence_id(e, i)
        names[key] = f"({e['name']} {e['args'].get('ticker', '')})".replace(" )", ")")
        if "." in key:
            steps.setdefault(key.split(".")[0], []).append(e)
    for step, items in steps.items():
        tools = ", ".join(dict.fromkeys(e["name"] for e in items))
        tickers = " ".join(dict.fromkeys(str(e["args"].get("ticker", "")) for e in items))
        names[step] = f"({tools} {tickers})".replace(" )", ")")
    return names
