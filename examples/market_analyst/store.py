"""Where runs wait for a person: one record per run, and each decision taken exactly once.

Records live in `analyst.db` under the state directory (a `SQLiteCheckpointer`), beside
the profile, the decisions and the report archive; the loops' own checkpoints are in
`loops.db`. A record moves running -> pending -> published | rejected; a run that
stopped on an error stays "running" with the error noted, and `--resume` continues it.
A decision is claimed in one SQLite transaction (the first one wins, in any process),
then applied; applying is idempotent, so a crash between the two is repaired by the
next attempt.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentloops import SQLiteCheckpointer
from market_analyst.archive import ArchivedReport, ReportArchive, SQLiteArchive
from market_analyst.data import NOTICE
from market_analyst.db import transaction
from market_analyst.memory import ProfileStore
from market_analyst.report import md_inline
from market_analyst.trades import TradeStore

RUNNING, PENDING, PUBLISHED, REJECTED = "running", "pending", "published", "rejected"


class UnknownRun(LookupError):
    """No run with this id; the message lists the runs waiting for a decision."""

    def __init__(self, run_id: str, pending: list[str]):
        self.run_id, self.pending = run_id, pending
        listed = ", ".join(pending) if pending else "none"
        super().__init__(f"no run with id {run_id!r}. Runs waiting for a decision: {listed}")


class NoDraftYet(ValueError):
    """A decision on a run that has not reached its draft."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """Who decided what, how, and when; `edited` is the person's Markdown, if any."""

    approved: bool
    by: str
    via: str
    """How the decision was given: "prompt", "--approve", "--yes", "$EDITOR", ..."""
    at: str
    edited: str | None = None


class RunStore:
    """Run records, decisions, the profile, the archive and trade proposals (`analyst.db`),
    the loops' checkpoints (`loops.db`), and the simulated trade ledger (`ledger.jsonl`).

    Args:
        state_dir: the directory for both files (created if missing).
        reports_dir: where approved reports are also written, as `RUN_ID.md`.
    """

    def __init__(self, state_dir: Path, reports_dir: Path):
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir, self.reports_dir = state_dir, reports_dir
        self.db_path = state_dir / "analyst.db"
        self.records = SQLiteCheckpointer(self.db_path)
        self.loops = SQLiteCheckpointer(state_dir / "loops.db")
        self.profile = ProfileStore(self.db_path)
        self.archive: ReportArchive = SQLiteArchive(self.db_path)
        self.trades = TradeStore(self.db_path)
        self.ledger_path = state_dir / "ledger.jsonl"
        with transaction(self.db_path, write=True) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS decisions (run_id TEXT PRIMARY KEY,"
                " approved INTEGER NOT NULL, by TEXT NOT NULL, via TEXT NOT NULL,"
                " at TEXT NOT NULL, edited TEXT)"
            )

    def create(self, run_id: str, request: str, **fields: Any) -> dict[str, Any]:
        record = {
            "run_id": run_id,
            "request": request,
            "status": RUNNING,
            "created": now(),
            **fields,
        }
        self.records.save(run_id, record)
        return record

    def get(self, run_id: str) -> dict[str, Any]:
        """The record; raises `UnknownRun` (listing pending runs) for an unknown id."""
        record = self.records.load(run_id)
        if record is None:
            raise UnknownRun(run_id, self.pending())
        return record

    def update(self, run_id: str, **fields: Any) -> dict[str, Any]:
        record = {**self.get(run_id), **fields}
        self.records.save(run_id, record)
        return record

    def pending(self) -> list[str]:
        """Runs waiting for a decision, oldest first."""
        return self._with_status(PENDING)

    def interrupted(self) -> list[str]:
        """Runs that stopped before their draft was ready (resumable)."""
        return self._with_status(RUNNING)

    def _with_status(self, status: str) -> list[str]:
        return [record["run_id"] for record in self.runs(status)]

    def runs(self, *statuses: str) -> list[dict[str, Any]]:
        """The records whose status is one of `statuses`, least recently saved first."""
        out = []
        for run_id in self.records.list_runs():
            record = self.records.load(run_id)
            if record is not None and record.get("status") in statuses:
                out.append(record)
        return out

    def decide(
        self,
        run_id: str,
        approve: bool,
        *,
        by: str,
        via: str,
        edited: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Approve (publish, with the person's edit if given) or reject a pending run.

        Returns `(record, changed)`. The first decision on a run wins: a later one
        (from any process) changes nothing and gets `changed=False` with the record as
        the first decision left it. Publishing archives the report and writes
        `reports_dir/RUN_ID.md`, each exactly once.

        Raises:
            NoDraftYet: the run has not reached its draft.
        """
        record = self.get(run_id)
        if record["status"] == RUNNING:
            raise NoDraftYet(f"run {run_id} has no draft to decide on yet; resume it first")
        wanted = Decision(approved=approve, by=by, via=via, at=now(), edited=edited)
        with transaction(self.db_path, write=True) as db:
            changed = db.execute(
                "INSERT OR IGNORE INTO decisions (run_id, approved, by, via, at, edited)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, int(approve), by, via, wanted.at, edited),
            ).rowcount
            approved, *rest = db.execute(
                "SELECT approved, by, via, at, edited FROM decisions WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        decision = Decision(
            approved=bool(approved), by=rest[0], via=rest[1], at=rest[2], edited=rest[3]
        )
        return self._apply(record, decision), bool(changed)

    def _apply(self, record: dict[str, Any], decision: Decision) -> dict[str, Any]:
        run_id = record["run_id"]
        if not decision.approved:
            return self.update(run_id, status=REJECTED, decision=asdict(decision))
        markdown = render_report(record, decision)
        draft = record.get("draft_record") or {}
        self.archive.add(
            ArchivedReport(
                run_id=run_id,
                published=decision.at,
                request=record["request"],
                title=draft.get("title", f"Report {run_id}"),
                tickers=tuple(draft.get("tickers", [])),
                recommendation=draft.get("recommendation", "?"),
                decided_by=decision.by,
                markdown=markdown,
            )
        )
        path = self.reports_dir / f"{run_id}.md"
        if not path.exists():  # written whole, then moved into place: never half a file
            self.reports_dir.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            partial.write_text(markdown, encoding="utf-8")
            os.replace(partial, path)
        return self.update(
            run_id, status=PUBLISHED, report_path=str(path), decision=asdict(decision)
        )


def render_report(record: dict[str, Any], decision: Decision) -> str:
    """The published Markdown: the draft (or the person's edit), with where it came from
    and who checked it. The request and other model or user text are escaped, so HTML
    or a forged heading in them is shown as text."""
    verdict = record.get("verdict", {})
    reasons = "\n".join(f"- {md_inline(r)}" for r in verdict.get("reasons", []))
    edited = "; edited by the approver before publishing" if decision.edited else ""
    body = decision.edited if decision.edited is not None else record.get("draft", "")
    return (
        f"# Market analyst report {record['run_id']}\n\n"
        f"> {record.get('data_notice') or NOTICE}\n\n"
        f"- Request: {md_inline(record['request'])}\n"
        f"- Route: {record.get('route', '?')} ({md_inline(record.get('route_reasoning', ''))})\n"
        f"- Model: {md_inline(record.get('model', '?'))}\n"
        f"- Evaluator verdict: **{verdict.get('verdict', '?')}**\n"
        f"- Approved by {md_inline(decision.by)} ({md_inline(decision.via)}) at "
        f"{decision.at}{edited}\n\n"
        f"{body.strip()}\n\n"
        f"## Evaluator's reasons\n\n{reasons or '- (none given)'}\n"
    )


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
