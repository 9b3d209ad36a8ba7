"""How the command line prints: rich tables on a terminal, plain text otherwise, JSON for
scripts.

Rule: it knows how to lay text out, nothing of runs or stores.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO


class Output:
    """Where a command prints. `as_json`: every call prints JSON instead (`data`); `rich`:
    draw tables with rich (default: when the stream is a terminal and rich is installed)."""

    def __init__(self, stream: TextIO, *, as_json: bool = False, rich: bool | None = None):
        self.stream = stream
        self.as_json = as_json
        self.rich = _rich_usable(stream) if rich is None else rich

    def data(self, value: Any) -> None:
        """One JSON document (one line: a `follow` prints JSON Lines)."""
        self.stream.write(json.dumps(value, default=str, ensure_ascii=False) + "\n")
        self.stream.flush()

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def fields(self, title: str, pairs: Sequence[tuple[str, Any]]) -> None:
        """A heading, then one `name: value` line per pair."""
        width = max((len(name) for name, _ in pairs), default=0)
        self.line(f"{title}")
        for name, value in pairs:
            self.line(f"  {name.ljust(width)}  {value}")

    def table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Rows under headers: a rich table, or columns padded with spaces."""
        if self.rich:
            self._rich_table(title, headers, rows)
            return
        text = [[str(c) for c in row] for row in rows]
        widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(headers)]
        self.line(title)
        self.line("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
        for row in text:
            self.line("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def _rich_table(
        self, title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, title_justify="left")
        for header in headers:
            table.add_column(header, overflow="fold")
        for row in rows:
            table.add_row(*(str(c) for c in row))
        Console(file=self.stream, force_terminal=self.stream.isatty() or None).print(table)


def _rich_usable(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    if not (callable(isatty) and isatty()):
        return False
    try:
        import rich  # noqa: F401
    except ImportError:  # pragma: no cover - rich is in the dev and examples extras
        return False
    return True


def short(text: object, width: int = 60) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
