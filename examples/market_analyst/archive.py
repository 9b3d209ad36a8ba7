"""The report archive: every published report, listed, shown and searched by full text.

`ReportArchive` is the small interface the CLI (and later the web app) uses;
`SQLiteArchive` implements it with SQLite's FTS5 in the example's database. A PostgreSQL
version would implement the same four methods with its own full-text search
(`tsvector`, `websearch_to_tsquery`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from market_analyst.db import transaction


@dataclass(frozen=True, kw_only=True)
class ArchivedReport:
    """One published report."""

    run_id: str
    published: str
    """When it was approved (ISO 8601, UTC)."""
    request: str
    title: str
    tickers: tuple[str, ...]
    recommendation: str
    decided_by: str
    markdown: str
    """The report as published (the person's edit, when there was one)."""


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """A report that matched a search, with the matching passage (marked «like this»)."""

    run_id: str
    published: str
    title: str
    recommendation: str
    snippet: str


class ReportArchive(Protocol):
    """Where published reports go; implementations must be safe across processes."""

    def add(self, report: ArchivedReport) -> bool:
        """Archive a report; False (and no change) if this run is already archived."""
        ...

    def get(self, run_id: str) -> ArchivedReport | None: ...

    def recent(self, limit: int = 20) -> list[ArchivedReport]:
        """The newest reports first."""
        ...

    def latest_for(self, ticker: str) -> ArchivedReport | None:
        """The newest report covering `ticker`, or None."""
        ...

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        """Reports containing every word of `query`, best match first."""
        ...


_COLUMNS = "run_id, published, request, title, tickers, recommendation, decided_by, markdown"


def _report(row: tuple[str, ...]) -> ArchivedReport:
    run_id, published, request, title, tickers, recommendation, decided_by, markdown = row
    return ArchivedReport(
        run_id=run_id,
        published=published,
        request=request,
        title=title,
        tickers=tuple(tickers.split()),
        recommendation=recommendation,
        decided_by=decided_by,
        markdown=markdown,
    )


def fts_query(text: str) -> str:
    """The words of `text` as an FTS5 query that matches all of them. Each word is quoted,
    so no input is read as FTS5 syntax (AND, NEAR, a stray quote or bracket)."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in text.split())


class SQLiteArchive:
    """`ReportArchive` over SQLite: a `reports` table, a ticker index, and an FTS5 index
    of the title, request and Markdown, written in one transaction."""

    def __init__(self, path: Path):
        self.path = path
        with transaction(path, write=True) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS reports (run_id TEXT PRIMARY KEY,"
                " published TEXT NOT NULL, request TEXT NOT NULL, title TEXT NOT NULL,"
                " tickers TEXT NOT NULL, recommendation TEXT NOT NULL,"
                " decided_by TEXT NOT NULL, markdown TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS report_tickers (ticker TEXT NOT NULL,"
                " run_id TEXT NOT NULL, PRIMARY KEY (ticker, run_id))"
            )
            db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS reports_fts USING fts5("
                "run_id UNINDEXED, title, request, markdown)"
            )

    def add(self, report: ArchivedReport) -> bool:
        row = (
            report.run_id,
            report.published,
            report.request,
            report.title,
            " ".join(report.tickers),
            report.recommendation,
            report.decided_by,
            report.markdown,
        )
        with transaction(self.path, write=True) as db:
            added = db.execute(
                f"INSERT OR IGNORE INTO reports ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            ).rowcount
            if added:
                db.executemany(
                    "INSERT INTO report_tickers (ticker, run_id) VALUES (?, ?)",
                    [(t, report.run_id) for t in dict.fromkeys(report.tickers)],
                )
                db.execute(
                    "INSERT INTO reports_fts (run_id, title, request, markdown)"
                    " VALUES (?, ?, ?, ?)",
                    (report.run_id, report.title, report.request, report.markdown),
                )
        return bool(added)

    def get(self, run_id: str) -> ArchivedReport | None:
        with transaction(self.path) as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM reports WHERE run_id = ?", (run_id,))
            found = row.fetchone()
        return None if found is None else _report(found)

    def recent(self, limit: int = 20) -> list[ArchivedReport]:
        with transaction(self.path) as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM reports ORDER BY published DESC, rowid DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_report(r) for r in rows]

    def latest_for(self, ticker: str) -> ArchivedReport | None:
        with transaction(self.path) as db:
            row = db.execute(
                f"SELECT {', '.join('r.' + c.strip() for c in _COLUMNS.split(','))}"
                " FROM reports r JOIN report_tickers t ON t.run_id = r.run_id"
                " WHERE t.ticker = ? ORDER BY r.published DESC, r.rowid DESC LIMIT 1",
                (ticker.strip().upper(),),
            ).fetchone()
        return None if row is None else _report(row)

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        match = fts_query(query)
        if not match:
            return []
        with transaction(self.path) as db:
            rows = db.execute(
                "SELECT r.run_id, r.published, r.title, r.recommendation,"
                " snippet(reports_fts, -1, '«', '»', ' … ', 12)"
                " FROM reports_fts f JOIN reports r ON r.run_id = f.run_id"
                " WHERE reports_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, limit),
            ).fetchall()
        return [
            SearchHit(run_id=a, published=b, title=c, recommendation=d, snippet=e)
            for a, b, c, d, e in rows
        ]
