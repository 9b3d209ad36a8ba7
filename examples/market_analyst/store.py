"""Where runs wait for a person: each run a journal on the library's run store, each decision
taken once.

`analyst.db` under the state directory is one `SQLiteStore` holding the analyst's journal
per run (kind "market_analyst"), the research loops' journals (`RUN_ID/research`) and the
trade proposals' (`trades.py`), and, beside them in the same file, the example's own
tables: the profile and the report archive. Whoever works on a run holds its lease.

A run moves running -> pending -> published | rejected, as its journal says. The decision
is a keyed record ("decision", key "report"): the first one recorded wins, in any process.
Publishing (the archive, the Markdown file, the "published" record) happens under the
lease, and each step is idempotent, so a process that died between the decision and the
"published" record is repaired by the next attempt.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentloops import RunNotFound, SQLiteStore, Usage
from agentloops.journal import JournalRecord, RunInfo
from market_analyst import journal
from market_analyst.archive import ArchivedReport, ReportArchive, SQLiteArchive
from market_analyst.data import NOTICE
from market_analyst.layout import refuse_old_layout
from market_analyst.memory import ProfileStore
from market_analyst.report import md_inline
from market_analyst.trades import Trades

RUNNING, PENDING, PUBLISHED, REJECTED = "running", "pending", "published", "rejected"
KIND = "market_analyst"
"""The kind of the analyst's journals in the run store."""


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


class AnalystStore:
    """The runs (journals), the profile and the archive in `analyst.db`, the simulated trade
    ledger (`ledger.jsonl`), and the published reports' directory.

    Args:
        state_dir: the directory for the database and the ledger (created if missing).
        reports_dir: where approved reports are also written, as `RUN_ID.md`.
        lease_ttl: seconds a lease lasts without renewal: a crashed process's runs are
            free again this long after it stopped renewing.
        label: names this program in lease holders ("cli", "web").

    Raises:
        OldStateFile: `analyst.db` is from an earlier version of the example.
    """

    def __init__(
        self,
        state_dir: Path,
        reports_dir: Path,
        *,
        lease_ttl: float = journal.LEASE_TTL,
        label: str = "cli",
    ):
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir, self.reports_dir = state_dir, reports_dir
        self.db_path = state_dir / "analyst.db"
        refuse_old_layout(self.db_path)
        self.runs = SQLiteStore(self.db_path)
        self.lease_ttl, self.label = lease_ttl, label
        self.profile = ProfileStore(self.db_path)
        self.archive: ReportArchive = SQLiteArchive(self.db_path)
        self.trades = Trades(self.runs, lease_ttl=lease_ttl, label=label)
        self.ledger_path = state_dir / "ledger.jsonl"

    # -- reading -------------------------------------------------------------------------

    def create(self, run_id: str, request: str, **fields: Any) -> dict[str, Any]:
        """Start the run's journal with its request and settings (`RunExists` if taken)."""
        lease = self.runs.start(
            run_id,
            kind=KIND,
            ttl=self.lease_ttl,
            holder=journal.holder_id(self.label),
            meta={"request": request},
            status=RUNNING,
        )
        try:
            started = {"request": request, "created": now(), **fields}
            self.runs.append(lease, "started", started)
        finally:
            self.runs.release(lease)
        return self.get(run_id)

    def get(self, run_id: str) -> dict[str, Any]:
        """The run's record, folded from its journal, with its lease if another holds it;
        raises `UnknownRun` (listing pending runs) for an unknown id."""
        try:
            info = self.runs.run_info(run_id)
        except RunNotFound:
            info = None
        if info is None or info.kind != KIND:
            raise UnknownRun(run_id, self.pending())
        return self._record(info)

    def _record(self, info: RunInfo) -> dict[str, Any]:
        record = fold(info.run_id, self.runs.read(info.run_id))
        record["lease"] = _lease(info)
        if "notes" not in record:  # stopped in research: what its journal holds so far
            attempt = record.get("research_attempts", 0) + 1
            record["evidence"] = self._evidence_so_far(info.run_id, attempt)
        return record

    def _evidence_so_far(self, run_id: str, attempt: int) -> list[dict[str, Any]]:
        from market_analyst.evidence import from_journal  # its tools module is heavier

        try:
            return from_journal(self.runs.read(research_run(run_id, attempt)))
        except RunNotFound:
            return []

    def run_ids(self) -> list[str]:
        """Every run, oldest first."""
        return [info.run_id for info in self.runs.list_runs(kind=KIND)]

    def runs_with(self, *statuses: str) -> list[dict[str, Any]]:
        """The records whose status is one of `statuses`, oldest first."""
        found = [i for i in self.runs.list_runs(kind=KIND) if i.status in statuses]
        return [self._record(info) for info in found]

    def pending(self) -> list[str]:
        """Runs waiting for a decision, oldest first."""
        return [i.run_id for i in self.runs.list_runs(kind=KIND, status=PENDING)]

    def interrupted(self) -> list[RunInfo]:
        """Runs that have not reached their draft: stopped part-way (resumable), or being
        worked on now (`leased`)."""
        return self.runs.list_runs(kind=KIND, status=RUNNING)

    @contextmanager
    def hold(self, run_id: str) -> Iterator[journal.Held]:
        """The run under this process's lease while the block runs.

        Raises:
            RunLeased: another process holds it (it names who, and until when).
            UnknownRun: there is no such run.
        """
        holder = journal.holder_id(self.label)
        try:
            lease = self.runs.acquire(run_id, ttl=self.lease_ttl, holder=holder)
        except RunNotFound:
            raise UnknownRun(run_id, self.pending()) from None
        with journal.hold(self.runs, lease, fold) as run:
            yield run

    # -- deciding ------------------------------------------------------------------------

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

        Returns `(record, changed)`. The first decision on a run wins: a later one (from
        any process) changes nothing and gets `changed=False` with the record as the first
        decision left it. Publishing archives the report and writes
        `reports_dir/RUN_ID.md`, each exactly once.

        Raises:
            NoDraftYet: the run has not reached its draft.
            RunLeased: another process holds the run now.
        """
        with self.hold(run_id) as run:
            record = run.record
            if "verdict" not in record:
                raise NoDraftYet(f"run {run_id} has no draft to decide on yet; resume it first")
            changed = record.get("decision") is None
            if changed:
                wanted = Decision(approved=approve, by=by, via=via, at=now(), edited=edited)
                status = None if approve else REJECTED
                run.add("decision", asdict(wanted), key="report", status=status)
            return self._publish(run), changed

    def _publish(self, run: journal.Held) -> dict[str, Any]:
        """Publish an approved run that is not published yet; each step may be repeated."""
        record = run.record
        if record["status"] != PENDING or not record["decision"]["approved"]:
            return record
        run_id, decision = run.run_id, Decision(**record["decision"])
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
        return run.add("published", {"report_path": str(path)}, key="report", status=PUBLISHED)


def research_run(run_id: str, attempt: int = 1) -> str:
    """The id of a run's research loop (ReWOO or Plan-and-Execute) in the store; a run whose
    research ended without a report (`InvalidOutput`) tries again in a new one."""
    return f"{run_id}/research" if attempt == 1 else f"{run_id}/research-{attempt}"


def fold(run_id: str, records: Sequence[JournalRecord]) -> dict[str, Any]:
    """A run's record from its journal: the request and settings, each finished stage, the
    usage of every process that worked on it, the last error, the decision."""
    record: dict[str, Any] = {"run_id": run_id, "status": RUNNING}
    usage, calls = Usage(), {}
    for r in records:
        if r.kind in ("started", "route", "research", "draft"):
            record.update(r.data)
        elif r.kind == "verdict":
            record.update(r.data, status=PENDING, error=None)
        elif r.kind == "usage":
            usage = usage + Usage(**r.data["usage"])
            for role, n in r.data["calls_by_role"].items():
                calls[role] = calls.get(role, 0) + n
        elif r.kind == "stopped":
            record["error"] = r.data["error"]
        elif r.kind == "research_failed":
            record["research_attempts"] = record.get("research_attempts", 0) + 1
        elif r.kind == "decision":
            record["decision"] = r.data
            if not r.data["approved"]:
                record["status"] = REJECTED
        elif r.kind == "published":
            record.update(r.data, status=PUBLISHED)
    record.update(usage=dataclasses.asdict(usage), calls_by_role=calls)
    return record


def _lease(info: RunInfo) -> dict[str, str] | None:
    """Who works on the run now, if anyone: its holder and until when (UTC)."""
    if not info.leased or info.lease_expires_at is None:
        return None
    return {"holder": str(info.holder), "until": info.lease_expires_at.isoformat()}


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
