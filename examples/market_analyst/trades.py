"""Trade proposals and their decisions, beside the runs in `analyst.db`, each taken once.

A published report that recommends buying or selling may lead to one proposal (one
trade at most): `claim` creates it in one SQLite transaction, so a second click or a
second process gets the first proposal back. A proposal moves proposing -> executed |
waiting | refused | none | failed; a waiting one is decided once (`claim_decision`, the
first decision in any process wins), moves to applying, then executed | denied |
refused. A failed proposal (the model or a tool broke) may be proposed again: the
ledger holds at most one trade per trade id, so a retry can never trade twice.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from market_analyst.db import transaction

PROPOSING, WAITING, APPLYING = "proposing", "waiting", "applying"
EXECUTED, REFUSED, DENIED, NONE, FAILED = "executed", "refused", "denied", "none", "failed"
OPEN = (PROPOSING, WAITING, APPLYING)


class UnknownTrade(LookupError):
    """No trade with this id; the message lists the trades waiting for a decision."""

    def __init__(self, trade_id: str, waiting: list[str]):
        listed = ", ".join(waiting) if waiting else "none"
        super().__init__(f"no trade with id {trade_id!r}. Trades waiting for a decision: {listed}")


def trade_id_for(run_id: str) -> str:
    """The id of the trade a run's report may lead to: "ma-1a2b3c4d" -> "tr-1a2b3c4d"."""
    return "tr-" + run_id.removeprefix("ma-")


class TradeStore:
    """Table `trades` (one row per proposal, its record as JSON) and `trade_decisions`."""

    def __init__(self, path: Path):
        self.path = path
        with transaction(path, write=True) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS trades (trade_id TEXT PRIMARY KEY,"
                " run_id TEXT UNIQUE NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL,"
                " updated TEXT NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS trade_decisions (trade_id TEXT PRIMARY KEY,"
                " approved INTEGER NOT NULL, by TEXT NOT NULL, via TEXT NOT NULL,"
                " at TEXT NOT NULL)"
            )

    def claim(self, run_id: str, **fields: Any) -> tuple[dict[str, Any], bool]:
        """Start the proposal for `run_id`'s report: `(record, True)`, or the proposal
        already made `(record, False)`. A failed one is taken over and starts again."""
        trade_id = trade_id_for(run_id)
        record = {
            "trade_id": trade_id,
            "run_id": run_id,
            "status": PROPOSING,
            "created": now(),
            **fields,
        }
        with transaction(self.path, write=True) as db:
            row = db.execute("SELECT data FROM trades WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None:
                earlier: dict[str, Any] = json.loads(row[0])
                if earlier["status"] != FAILED:
                    return earlier, False
                record = {**earlier, **record, "retried": earlier.get("retried", 0) + 1}
            db.execute(
                "INSERT INTO trades (trade_id, run_id, status, data, updated)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT(trade_id) DO UPDATE SET"
                " status = excluded.status, data = excluded.data, updated = excluded.updated",
                (trade_id, run_id, PROPOSING, json.dumps(record), now()),
            )
        return record, True

    def get(self, trade_id: str) -> dict[str, Any]:
        """The record; raises `UnknownTrade` (listing waiting trades) for an unknown id."""
        with transaction(self.path) as db:
            row = db.execute("SELECT data FROM trades WHERE trade_id = ?", (trade_id,)).fetchone()
        if row is None:
            raise UnknownTrade(trade_id, [t["trade_id"] for t in self.list(WAITING)])
        found: dict[str, Any] = json.loads(row[0])
        return found

    def for_run(self, run_id: str) -> dict[str, Any] | None:
        """The proposal made after `run_id`'s report, if any."""
        with transaction(self.path) as db:
            row = db.execute("SELECT data FROM trades WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else json.loads(row[0])  # type: ignore[no-any-return]

    def update(self, trade_id: str, **fields: Any) -> dict[str, Any]:
        with transaction(self.path, write=True) as db:
            row = db.execute("SELECT data FROM trades WHERE trade_id = ?", (trade_id,)).fetchone()
            if row is None:
                raise UnknownTrade(trade_id, [])
            record = {**json.loads(row[0]), **fields}
            db.execute(
                "UPDATE trades SET status = ?, data = ?, updated = ? WHERE trade_id = ?",
                (record["status"], json.dumps(record), now(), trade_id),
            )
        return record

    def list(self, *statuses: str) -> list[dict[str, Any]]:
        """Trades with one of `statuses` (all when none given), newest first."""
        query, params = "SELECT data FROM trades", ()
        if statuses:
            query += f" WHERE status IN ({', '.join('?' * len(statuses))})"
            params = statuses  # type: ignore[assignment]
        with transaction(self.path) as db:
            rows = db.execute(query + " ORDER BY updated DESC, trade_id", params).fetchall()
        return [json.loads(r[0]) for r in rows]

    def claim_decision(
        self, trade_id: str, approved: bool, *, by: str, via: str
    ) -> tuple[dict[str, Any], bool]:
        """Record a person's decision on a waiting trade: `(record, True)` when this one
        is the first (the trade moves to applying, carrying the decision), else
        `(record, False)` with the record as the first decision left it."""
        decision = {"approved": approved, "by": by, "via": via, "at": now()}
        with transaction(self.path, write=True) as db:
            row = db.execute("SELECT data FROM trades WHERE trade_id = ?", (trade_id,)).fetchone()
            if row is None:
                raise UnknownTrade(trade_id, [])
            record = json.loads(row[0])
            if record["status"] != WAITING:
                return record, False
            inserted = db.execute(
                "INSERT OR IGNORE INTO trade_decisions (trade_id, approved, by, via, at)"
                " VALUES (?, ?, ?, ?, ?)",
                (trade_id, int(approved), by, via, decision["at"]),
            ).rowcount
            if not inserted:  # a decision without the status moving: never apply it twice
                return record, False
            record = {**record, "status": APPLYING, "decision": decision}
            db.execute(
                "UPDATE trades SET status = ?, data = ?, updated = ? WHERE trade_id = ?",
                (APPLYING, json.dumps(record), now(), trade_id),
            )
        return record, True


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
