"""How a `Comparison` is shown: a markdown table, a CSV file, a PNG chart.

The chart needs matplotlib (the optional `chart` extra), imported only when a chart is
drawn. It builds a bare `Figure` rather than using pyplot: no global backend or GUI
state, so it draws the same on a server without a display and leaves pyplot alone.

Rule: it knows the records it shows (`comparison.records`), never the harness.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal

    from agentloops.comparison.records import LoopSummary

TOKEN_KINDS = {
    "input_tokens": "uncached input",
    "cache_read_tokens": "cache read",
    "cache_write_tokens": "cache write",
    "output_tokens": "output",
}
CSV_COLUMNS = (
    *("loop", "attempts", "successes", "success_rate", "errors", "rejected"),
    *("incorrect_acceptances", "incorrect_acceptance_rate", "model_calls", *TOKEN_KINDS),
    *("tool_calls", "tool_errors", "attempts_with_tool_errors", "recoveries", "recovery_rate"),
    "seconds",
    "cost",
)


def markdown_table(summaries: list[LoopSummary], tasks: int, trials: int) -> str:
    priced = any(s.cost is not None for s in summaries)  # a cost column only then
    rows = [
        "| loop | success | raised | wrong but passed | model calls | uncached in | cache read"
        " | cache write | output | tool calls | tool errors | recovered | seconds |"
        + (" cost |" if priced else ""),
        "|---" * (14 if priced else 13) + "|",
    ]
    for s in summaries:
        cells = [
            s.loop,
            f"{s.success_rate:.0%} ({s.successes}/{s.attempts})",
            str(s.errors),
            f"{s.incorrect_acceptances}/{s.rejected}" if s.rejected else "-",
            f"{s.mean(s.model_calls):.1f}",
            *(f"{s.mean(getattr(s.usage, kind)):,.0f}" for kind in TOKEN_KINDS),
            f"{s.mean(s.tool_calls):.1f}",
            str(s.tool_errors),
            f"{s.recoveries}/{s.attempts_with_tool_errors}" if s.tool_errors else "-",
            f"{s.mean(s.seconds):.2f}",
        ]
        if priced:
            cells.append(_money(s.cost_per_attempt))
        rows.append("| " + " | ".join(cells) + " |")
    note = (
        f"{tasks} tasks x {trials} trials per loop. Costs are means "
        "per attempt (raised attempts included). Wrong but passed: the evaluator passed an "
        "answer the checker rejects, of the wrong answers it judged. Recovered: right answers "
        "after a tool error."
    )
    return "\n".join([*rows, "", note])


def _money(amount: Decimal | None) -> str:
    """A cost per attempt as the table shows it (to a hundredth of a cent), or "-"."""
    return "-" if amount is None else f"{amount:.4f}"


def write_csv(summaries: list[LoopSummary], path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for s in summaries:
            tokens = {kind: getattr(s.usage, kind) for kind in TOKEN_KINDS}
            row = {c: tokens[c] if c in tokens else getattr(s, c) for c in CSV_COLUMNS}
            row["cost"] = "" if s.cost is None else str(s.cost)
            writer.writerow(row)
    return path


def draw_chart(summaries: list[LoopSummary], tasks: int, trials: int, path: Path) -> Path:
    """Four panels side by side, one bar per loop; every cost is a mean per attempt."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(
            "Comparison.chart needs matplotlib: pip install 'agentloops-kit[chart]'"
        ) from exc
    names = [s.loop for s in summaries]
    x = list(range(len(names)))
    fig = Figure(figsize=(4 + 2.2 * len(names), 4.5), layout="constrained")
    ax_ok, ax_calls, ax_tokens, ax_time = fig.subplots(1, 4)

    ax_ok.bar(x, [100 * s.success_rate for s in summaries], color="tab:green")
    ax_ok.set_ylim(0, 100)
    ax_ok.set_title("task success (%)")

    ax_calls.bar(x, [s.mean(s.model_calls) for s in summaries], color="tab:blue")
    ax_calls.set_title("model calls / attempt")

    bottom = [0.0] * len(summaries)
    for kind, label in TOKEN_KINDS.items():
        heights = [s.mean(getattr(s.usage, kind)) for s in summaries]
        ax_tokens.bar(x, heights, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax_tokens.set_title("tokens / attempt")
    fig.legend(loc="outside lower center", ncols=len(TOKEN_KINDS), fontsize="small")

    ax_time.bar(x, [s.mean(s.seconds) for s in summaries], color="tab:gray")
    ax_time.set_title("seconds / attempt")

    for ax in (ax_ok, ax_calls, ax_tokens, ax_time):
        ax.set_xticks(x, names, rotation=30, ha="right")
    title = f"{tasks} tasks x {trials} trials per loop"
    fig.suptitle(title, fontsize="medium")
    fig.savefig(path, format="png", dpi=120)
    return path
