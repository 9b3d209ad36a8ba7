"""`python -m agentloops`: operating durable runs over any store URL, without Python.

    python -m agentloops runs list [--status S] [--kind K]
    python -m agentloops runs show RUN_ID
    python -m agentloops runs follow RUN_ID [--after SEQ] [--events]
    python -m agentloops runs decide RUN_ID CALL_ID --approve|--deny|--rerun|--skip --by NAME
    python -m agentloops runs delete RUN_ID [--force]

The store is `--store URL` or the `AGENTLOOPS_STORE` variable: `sqlite:///runs.db` (a
path relative to here), `sqlite:////var/lib/runs.db` (absolute), or `postgresql://...`.
Tables are drawn with rich when stdout is a terminal and rich is installed, plain text
otherwise; `--json` prints JSON (JSON Lines for `follow`) for scripts. Exit codes are
`EXIT_CODES`.

Rule: a kit: it reads and decides through the stores and `engine.decisions`, never
drives a run (the next `resume(run_id)`, in a process with the tools, does).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from agentloops.errors import AgentLoopsError, DecisionRefused, RunLeased, RunNotFound

__all__ = ["EXIT_CODES", "main"]

EXIT_CODES = {
    "ok": 0,
    "error": 1,  # a store that cannot be reached or read
    "usage": 2,  # bad arguments, a bad store URL
    "not_found": 3,  # no such run
    "refused": 4,  # a decision refused: no such waiting call, contradicting, or wrong kind
    "leased": 5,  # a process drives the run now: try again when it pauses
    "timeout": 6,  # follow --timeout: no new record for that long
}
"""What `main` returns, by outcome."""


def parser() -> argparse.ArgumentParser:
    from agentloops.cli import runs

    top = argparse.ArgumentParser(
        prog="python -m agentloops", description="Operate agentloops' durable runs."
    )
    groups = top.add_subparsers(dest="group", required=True, metavar="COMMAND")
    group = groups.add_parser("runs", help="list, show, follow, decide and delete runs")
    commands = group.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    runs.add_commands(commands, _common())
    return top


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=os.environ.get("AGENTLOOPS_STORE"),
        help="the store's URL: sqlite:///PATH or postgresql://... (default: $AGENTLOOPS_STORE)",
    )
    common.add_argument("--json", action="store_true", help="print JSON, for scripts")
    return common


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the command line; returns its exit code (`EXIT_CODES`)."""
    from agentloops.cli.output import Output
    from agentloops.cli.stores import open_store

    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = parser().parse_args(argv)
    if not args.store:
        print("error: give --store URL or set AGENTLOOPS_STORE", file=err)
        return EXIT_CODES["usage"]
    try:
        store = open_store(args.store)
    except (AgentLoopsError, ImportError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_CODES["usage"]
    try:
        return int(args.run(store, args, Output(out, as_json=args.json)))
    except RunNotFound as exc:
        return _fail(err, exc, "not_found")
    except DecisionRefused as exc:
        return _fail(err, exc, "refused")
    except RunLeased as exc:
        return _fail(err, exc, "leased")
    except AgentLoopsError as exc:
        return _fail(err, exc, "error")
    except TimeoutError as exc:
        return _fail(err, exc, "timeout")
    except KeyboardInterrupt:  # a follow stopped by hand
        return EXIT_CODES["ok"]
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def _fail(err: TextIO, exc: Exception, outcome: str) -> int:
    print(f"error: {exc}", file=err)
    return EXIT_CODES[outcome]
