"""The human decision: approve, approve with edits, reject for good, or leave it pending.

From flags (`--approve`, `--reject`, `--edited FILE`, `--edit`, `--yes`) or, at a
terminal, a prompt. Edits come from a Markdown file or an `$EDITOR` session; the run's
record keeps the original draft, the edit and who decided. Ctrl-C or Ctrl-D at the
prompt leaves the run pending.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel

from market_analyst.display import line, verdict_panel
from market_analyst.facts import unsupported_numbers
from market_analyst.report import evidence_lines
from market_analyst.store import PUBLISHED, REJECTED, AnalystStore

Ask = Callable[[str], str]
"""Reads one answer from the person (raises EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C)."""

CHOICES = "[y] publish  [e] edit, then publish  [n] reject for good  [l] later"


def who(args: argparse.Namespace) -> str:
    """The person deciding: `--by NAME`, else the login name."""
    if args.by:
        return str(args.by)
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"


def approval(
    console: Console,
    store: AnalystStore,
    record: dict[str, Any],
    args: argparse.Namespace,
    ask: Ask | None,
    hint: str,
) -> int:
    """Decide now (flags or the prompt) or leave the run pending; returns the exit code.

    `hint` is the command that resumes this run (with its state directories).
    """
    run_id, status = record["run_id"], record["status"]
    if status in (PUBLISHED, REJECTED):
        where = f" to {record.get('report_path')}" if status == PUBLISHED else ""
        console.print(line(f"Run {run_id} was already {status}{where}; nothing to do."))
        return 0
    verdict = record["verdict"]["verdict"]
    decision: tuple[bool, str, str | None] | None = None  # (approve, via, edited Markdown)
    if args.edited:
        edited = _read(console, args.edited)
        if edited is None:
            return 2
        decision = (True, f"--edited {args.edited}", edited)
    elif args.edit:
        edited = edit_in_editor(console, record["draft"])
        decision = (True, "$EDITOR", edited) if edited else None
    elif args.approve or args.reject:
        decision = (bool(args.approve), "--approve" if args.approve else "--reject", None)
    elif args.yes and verdict == "pass":
        decision = (True, "--yes", None)
    elif args.yes:
        console.print(
            line(
                (
                    f"--yes approves only a passing draft; the evaluator voted {verdict}, "
                    "so a person must decide.",
                    "yellow",
                )
            )
        )
    elif ask is not None:
        if args.resume:
            console.print(Panel(Markdown(record["draft"]), title=f"Draft of {run_id}"))
            console.print(verdict_panel(verdict, record["verdict"]["reasons"]))
        try:
            decision = _prompt(console, record, ask)
        except (KeyboardInterrupt, EOFError) as stop:
            said = line(f"\nLeft {run_id} pending. Decide later with: {hint}")
            console.print(said, soft_wrap=True)  # a command stays on one line
            return 130 if isinstance(stop, KeyboardInterrupt) else 0
    if decision is None:
        console.print(
            line(
                f"Run {run_id} is waiting for approval. Decide later with:\n"
                f"  {hint} --approve\n  {hint} --reject\n"
                f"  {hint} --edit        (edit in $EDITOR, then publish)"
            ),
            soft_wrap=True,  # each command stays on one line, as it can be pasted
        )
        return 0
    approve, via, edited = decision
    if edited is not None:
        _warn_unsupported(console, record, edited)
    record, changed = store.decide(run_id, approve, by=who(args), via=via, edited=edited)
    if not changed:
        console.print(line(f"Run {run_id} was already {record['status']}: nothing changed."))
    elif record["status"] == PUBLISHED:
        console.print(line(("Published ", "green"), str(record["report_path"])))
    else:
        console.print(line(f"Run {run_id} rejected for good; nothing published."))
    return 0


def _prompt(console: Console, record: dict[str, Any], ask: Ask) -> tuple[bool, str, str | None]:
    """Ask until the person decides; "later" (or an empty answer) raises EOFError."""
    run_id = record["run_id"]
    while True:
        answer = ask(f"Publish report {run_id}? {CHOICES}: ").strip().lower()
        if answer in ("y", "yes"):
            return True, "prompt", None
        if answer in ("e", "edit"):
            edited = edit_in_editor(console, record["draft"])
            if edited is not None:
                return True, "prompt, $EDITOR", edited
        elif answer in ("n", "no"):
            sure = ask(f"Reject {run_id} for good? It can never be published. [y/N]: ")
            if sure.strip().lower() in ("y", "yes"):
                return False, "prompt", None
            console.print(line("Not rejected."))
        elif answer in ("", "l", "later"):
            raise EOFError
        else:
            console.print(line(f"Please answer y, e, n or l ({answer!r} is none of them)."))


def edit_in_editor(console: Console, draft: str) -> str | None:
    """The draft after the person edits it in `$VISUAL` or `$EDITOR`; None (and why, on
    screen) when there is no editor, it failed, or nothing changed."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        console.print(
            line(
                (
                    "No editor: set $EDITOR (e.g. EDITOR=nano), or save the draft with "
                    "--show RUN_ID > draft.md, edit it, and pass --edited draft.md.",
                    "yellow",
                )
            )
        )
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as f:
        f.write(draft)
    path = Path(f.name)
    try:
        code = subprocess.run([*shlex.split(editor), str(path)], check=False).returncode
        edited = path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)
    if code != 0:
        console.print(line((f"The editor exited with status {code}; nothing changed.", "yellow")))
        return None
    if edited.strip() == draft.strip():
        console.print(line("No changes made."))
        return None
    if not edited.strip():
        console.print(line(("The edited report is empty; nothing published.", "yellow")))
        return None
    return edited


def _read(console: Console, path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        console.print(line((f"Cannot read {path}: {exc}", "red")))
        return None
    if not text.strip():
        console.print(line((f"{path} is empty; nothing published.", "red")))
        return None
    return text


def figures_not_in_evidence(record: dict[str, Any], edited: str) -> list[str]:
    """The figures an edit states that no tool output (nor the run's memory) holds."""
    known = "\n".join(evidence_lines(record.get("evidence", [])).values())
    return unsupported_numbers(edited, f"{known}\n{record.get('memory', '')}")


def _warn_unsupported(console: Console, record: dict[str, Any], edited: str) -> None:
    """Say which figures of an edit no tool output holds (the person may still publish)."""
    invented = figures_not_in_evidence(record, edited)
    if invented:
        console.print(
            line(
                (
                    "Note: the edit states figures no tool output holds: "
                    f"{', '.join(invented[:8])}. It is published as you wrote it.",
                    "yellow",
                )
            )
        )
