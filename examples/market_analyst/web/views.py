"""What the page is sent about stored things: a run's record, a run in a list, a published
report, the profile. Markdown is rendered here, on the server, with raw HTML turned off:
whatever a model, a request or an edit holds (`<script>`, `<img onerror=...>`) arrives
in the page escaped, as text, and only Markdown's own structure becomes elements.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt

from market_analyst.archive import ArchivedReport, SearchHit
from market_analyst.memory import Profile
from market_analyst.prompts import FLASH

# "commonmark" with html off: a tag in the text is escaped, never passed through; links
# with javascript:, vbscript:, file: or data: targets are refused by markdown-it itself.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")
_ALIGN = re.compile(r"text-align:(left|right|center)")


def to_html(markdown: str) -> str:
    """Markdown as HTML that holds no HTML from its source (see the module docstring).

    A table column's alignment (`|--:|`) becomes a class (`align-right`), not the `style`
    attribute markdown-it writes, which the page's Content-Security-Policy refuses.
    """
    tokens = _MARKDOWN.parse(markdown)
    for token in tokens:
        align = _ALIGN.fullmatch(str(token.attrs.get("style", "")))
        if align:
            del token.attrs["style"]
            token.attrs["class"] = f"align-{align[1]}"
    html: str = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})
    return html


def loop_name(route: str | None) -> str:
    if route is None:
        return ""
    return "ReWOO" if route == FLASH else "Plan-and-Execute"


def run_view(record: dict[str, Any], *, live: bool, running: bool = False) -> dict[str, Any]:
    """A run's record for the page: the fields it shows, the draft also as HTML.

    `live`: this server has the run's feed (the page follows it for the time line);
    `running`: this server is driving it now.
    """
    return {
        "run_id": record["run_id"],
        "request": record["request"],
        "status": record["status"],
        "mode": record.get("mode", "auto"),
        "created": record.get("created", ""),
        "model": record.get("model", ""),
        "route": record.get("route"),
        "loop": loop_name(record.get("route")),
        "route_reasoning": record.get("route_reasoning", ""),
        "evidence": [
            {"name": e["name"], "args": e["args"], "error": e["is_error"]}
            for e in record.get("evidence", [])
        ],
        "draft": record.get("draft"),
        "draft_html": to_html(record["draft"]) if "draft" in record else None,
        "figure_problems": record.get("figure_problems", []),
        "verdict": record.get("verdict"),
        "usage": record.get("usage", {}),
        "calls_by_role": record.get("calls_by_role", {}),
        "decision": record.get("decision"),
        "error": record.get("error"),
        "lease": record.get("lease"),
        "live": live,
        "running_here": running,
    }


def run_summary(record: dict[str, Any], *, live: bool) -> dict[str, Any]:
    """One line of a list of runs."""
    verdict = record.get("verdict") or {}
    return {
        "run_id": record["run_id"],
        "request": record["request"],
        "status": record["status"],
        "created": record.get("created", ""),
        "route": record.get("route"),
        "verdict": verdict.get("verdict"),
        "error": record.get("error"),
        "lease": record.get("lease"),
        "live": live,
    }


def report_view(report: ArchivedReport) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "published": report.published,
        "request": report.request,
        "title": report.title,
        "tickers": list(report.tickers),
        "recommendation": report.recommendation,
        "decided_by": report.decided_by,
        "markdown": report.markdown,
        "html": to_html(report.markdown),
    }


def report_line(report: ArchivedReport | SearchHit) -> dict[str, Any]:
    """One line of the archive: a recent report, or a search hit with its passage
    (the matching words marked «like this»; the page highlights them as text)."""
    return {
        "run_id": report.run_id,
        "published": report.published,
        "title": report.title,
        "recommendation": report.recommendation,
        "snippet": getattr(report, "snippet", ""),
    }


def profile_view(profile: Profile) -> dict[str, Any]:
    """The profile, with its holdings and tradable tickers also as the text the form edits
    ("NVDA=10, ...", "NVDA, MSFT")."""
    held = ", ".join(f"{t}={n:g}" for t, n in profile.holdings.items())
    tradable = ", ".join(profile.trade_tickers)
    return {**profile.model_dump(), "holdings_text": held, "trade_tickers_text": tradable}
