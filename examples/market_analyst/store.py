"""Where runs wait for a human: one saved record per run, and publishing exactly once.

Records live in a `SQLiteCheckpointer` file under the state directory, so a run paused
in one process is approved or rejected from another. A record moves
running -> pending -> published | rejected; a run that stopped on an error stays
"running" with the error noted, and `--resume` continues it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from agentloops import SQLiteCheckpointer
from market_analyst.data import NOTICE

RUNNING, PENDING, PUBLISHED, REJECTED = "running", "pending", "published", "rejected"


class UnknownRun(LookupError):
    """No run with this id; the message lists the runs waiting for a decision."""

    def __init__(self, run_id: str, pending: list[str]):
        self.run_id, self.pending = run_id, pending
        listed = ", ".join(pending) if pending else "none"
        super().__init__(f"no run with id {run_id!r}. Runs waiting for a decision: {listed}")


class RunStore:
    """Run records (`approvals.db`) and the loops' own checkpoints (`loops.db`).

    Args:
        state_dir: the directory for both files (created if missing).
        reports_dir: where approved reports are written as `RUN_ID.md`.
    """

    def __init__(self, state_dir: Path, reports_dir: Path):
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir, self.reports_dir = state_dir, reports_dir
        self.records = SQLiteCheckpointer(state_dir / "approvals.db")
        self.loops = SQLiteCheckpointer(state_dir / "loops.db")

    def create(self, run_id: str, request: str) -> dict[str, Any]:
        record = {"run_id": run_id, "request": request, "status": RUNNING, "created": _now()}
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
        out = []
        for run_id in self.records.list_runs():
            record = self.records.load(run_id)
            if record is not None and record.get("status") == status:
                out.append(run_id)
        return out

    def decide(self, run_id: str, approve: bool) -> tuple[dict[str, Any], bool]:
        """Approve (publish) or reject a pending run; `(record, changed)`.

        A run already decided is returned unchanged (`changed=False`): a second approval
        never publishes twice. The report file is created exclusively, so two processes
        approving at once still write it once.
        """
        record = self.get(run_id)
        if record["status"] in (PUBLISHED, REJECTED):
            return record, False
        if record["status"] != PENDING:
            raise ValueError(f"run {run_id} has no draft to decide on yet; resume it first")
        if not approve:
            return self.update(run_id, status=REJECTED, decided=_now()), True
        path = self.reports_dir / f"{run_id}.md"
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        try:
            with path.open("x", encoding="utf-8") as report:
                report.write(render_report(record))
            changed = True
        except FileExistsError:  # another process published it first
            changed = False
        return self.update(run_id, status=PUBLISHED, report=str(path), decided=_now()), changed


def render_report(record: dict[str, Any]) -> str:
    """The published Markdown: the draft, with where it came from and who checked it."""
    verdict = record.get("verdict", {})
    reasons = "\n".join(f"- {r}" for r in verdict.get("reasons", [])) or "- (none given)"
    return (
        f"# Market analyst report {record['run_id']}\n\n"
        f"> {NOTICE}\n\n"
        f"- Request: {record['request']}\n"
        f"- Route: {record.get('route', '?')} ({record.get('route_reasoning', '')})\n"
        f"- Model: {record.get('model', '?')}\n"
        f"- Evaluator verdict: **{verdict.get('verdict', '?')}**\n"
        f"- Approved by a person: {_now()}\n\n"
        f"{record.get('draft', '').strip()}\n\n"
        f"## Evaluator's reasons\n\n{reasons}\n"
    )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
