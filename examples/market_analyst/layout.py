"""The state file's layout: an `analyst.db` from before the runs were journals is refused,
with what to do, instead of being misread.

The example kept each run as one record in the old checkpointer's table (`runs`), its
decisions and trade proposals in tables of its own, and Plan-and-Execute's checkpoints in
`loops.db`. Those runs cannot be continued as journals, so the file is refused before
anything is written to it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

OLD_TABLES = ("runs", "decisions", "trades", "trade_decisions")


class OldStateFile(RuntimeError):
    """`analyst.db` was written by the example before its runs were journals."""


def refuse_old_layout(path: Path) -> None:
    """Refuse a database from before runs were journals, instead of misreading it."""
    if not path.exists():
        return
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return  # not ours to judge: the run store reports what is wrong with it
    try:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.Error:
        return
    finally:
        db.close()
    old = sorted({name for (name,) in rows} & set(OLD_TABLES))
    if old:
        aside = path.with_name(path.name + ".old")
        raise OldStateFile(
            f"{path} was written by an earlier version of this example (it keeps runs in "
            f"the tables {', '.join(old)}; runs are now journals on the library's run "
            f"store), and this version cannot read its runs. Move it aside and start "
            f"afresh: mv {path} {aside} (published reports stay in the reports directory "
            f"as Markdown, trades in ledger.jsonl), or give another --state-dir."
        )
