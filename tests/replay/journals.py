"""A recorded run as a JSON document (the corpus's file format), and back into a store.

A document holds the run's header (`kind`, `meta`, `status`), every record (`seq`,
`kind`, `key`, `data`, `at`), the scenario that made it and what replay must give
(`expect`). Loading goes through the public `RunStore` API only: `start`, one
`append_many` under that lease, `release`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentloops import RunStore

CORPUS = Path(__file__).resolve().parent / "corpus"


def dump(store: RunStore, run_id: str) -> dict[str, Any]:
    """The run's header and journal, as a corpus document has them."""
    info = store.run_info(run_id)
    return {
        "run": {"run_id": run_id, "kind": info.kind, "status": info.status, "meta": info.meta},
        "records": [
            {"seq": r.seq, "kind": r.kind, "key": r.key, "data": r.data, "at": r.at.isoformat()}
            for r in store.read(run_id)
        ],
    }


def load(store: RunStore, doc: dict[str, Any]) -> str:
    """Write the document's run into `store` as it was recorded; return its run id.

    The records get the sequence numbers they had (a journal has no gaps, so appending
    them in order gives the same ones) but the store's own timestamps: `at` is the
    store's clock by the store protocol, and nothing that replays a run reads it.
    """
    run = doc["run"]
    records = doc["records"]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1)), "a gap in seq"
    lease = store.start(run["run_id"], kind=run["kind"], ttl=30, meta=run["meta"])
    try:
        entries = [(r["kind"], r["data"], r["key"]) for r in records]
        if entries:
            store.append_many(lease, entries, status=run["status"])
        else:  # a run that died before its first record
            store.update_run(lease, status=run["status"])
    finally:
        store.release(lease)
    return str(run["run_id"])


def files(corpus: Path = CORPUS) -> list[Path]:
    """Every corpus file, in every generation's folder."""
    return sorted(corpus.rglob("*.json"))


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
