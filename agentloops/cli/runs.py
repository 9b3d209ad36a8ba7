"""The `runs` commands: list, show, follow, decide, delete.

Each command is a function `(store, args, out) -> exit code`, set on its parser as
`args.run`; errors are raised (`agentloops.cli.main` turns them into exit codes).

Rule: a command reads and writes through the store and `engine.decisions`; it never drives
a run, so it needs none of the run's tools or models.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentloops.cli import records as rows
from agentloops.cli.output import Output, short
from agentloops.engine.decisions import decide, waiting
from agentloops.journal.records import RunInfo, RunStore


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """The `runs` subcommands, on `commands` (an argparse subparsers object)."""
    p = commands.add_parser("list", parents=[common], help="the runs in the store")
    p.add_argument("--status", help="only runs with this status (running, paused, ...)")
    p.add_argument("--kind", help="only runs of this loop (react, rewoo, plan_execute)")
    p.add_argument(
        "--all", action="store_true", help="sub-runs too (an agent tool's, a handoff's calls)"
    )
    p.set_defaults(run=list_runs)

    p = commands.add_parser("show", parents=[common], help="a run: header, journal, waits")
    p.add_argument("run_id")
    p.set_defaults(run=show)

    p = commands.add_parser("follow", parents=[common], help="a run's records as they come")
    p.add_argument("run_id")
    p.add_argument("--after", type=int, default=0, help="start after this record (seq)")
    p.add_argument("--timeout", type=float, help="give up after this many quiet seconds")
    p.add_argument("--events", action="store_true", help="print typed events, not records")
    p.set_defaults(run=follow)

    p = commands.add_parser(
        "decide", parents=[common], help="decide a call the run waits for (see runs show)"
    )
    p.add_argument("run_id")
    p.add_argument("call_id")
    choice = p.add_mutually_exclusive_group(required=True)
    for flag, what in (
        ("approve", "run a call waiting for approval, with the arguments shown"),
        ("deny", "refuse a call waiting for approval (the model gets an error)"),
        ("rerun", "run a call in doubt again, with the same idempotency key"),
        ("skip", "record a call in doubt as not run"),
    ):
        choice.add_argument(f"--{flag}", dest="choice", action="store_const", const=flag, help=what)
    p.add_argument("--by", required=True, help="who decides (kept with the decision)")
    p.add_argument("--reason", help="why (kept with the decision)")
    p.set_defaults(run=decide_call)

    p = commands.add_parser("delete", parents=[common], help="delete a run and its journal")
    p.add_argument("run_id")
    p.add_argument("--force", action="store_true", help="even while a process holds it")
    p.set_defaults(run=delete)


def list_runs(store: RunStore, args: argparse.Namespace, out: Output) -> int:
    found = store.list_runs(status=args.status, kind=args.kind)
    below = 0
    if not args.all:  # a sub-run is shown by its parent (`runs show`), not as a run of its own
        shown = [i for i in found if not is_subrun(i)]
        found, below = shown, len(found) - len(shown)
    if out.as_json:
        out.data([rows.run_json(info) for info in found])
        return 0
    title = f"{len(found)} run(s)" + (
        f", and {below} sub-run(s) below them (--all)" if below else ""
    )
    out.table(title, rows.RUN_HEADERS, [rows.run_row(i) for i in found])
    return 0


def is_subrun(info: RunInfo) -> bool:
    """Whether the run is a call of another run's agent tool or handoff (its header names
    the call it answers)."""
    return "call_id" in info.meta and "parent_run_id" in info.meta


def show(store: RunStore, args: argparse.Namespace, out: Output) -> int:
    info = store.run_info(args.run_id)
    journal = store.read(args.run_id)
    waits = waiting(store, args.run_id)
    if out.as_json:
        out.data(
            {
                "run": rows.run_json(info),
                "records": [rows.record_json(r) for r in journal],
                "waiting": [rows.waiting_json(w) for w in waits],
            }
        )
        return 0
    header = rows.run_json(info)
    out.fields(
        f"run {info.run_id}",
        [(name, header[name]) for name in ("kind", "status", "created_at", "updated_at")]
        + [("leased by", f"{info.holder} until {header['lease_expires_at']}")] * info.leased
        + [(k, v) for k, v in info.meta.items() if k != "format"],
    )
    out.line()
    out.table(f"journal: {len(journal)} record(s)", rows.RECORD_HEADERS, map_rows(journal))
    out.line()
    if waits:
        out.table(
            "waiting for a decision", rows.WAITING_HEADERS, [rows.waiting_row(w) for w in waits]
        )
        out.line(f"decide: python -m agentloops runs decide {info.run_id} CALL_ID --FLAG --by NAME")
    else:
        out.line("waiting for no decision")
    return 0


def map_rows(journal: list[Any]) -> list[tuple[Any, ...]]:
    return [rows.record_row(r) for r in journal]


def follow(store: RunStore, args: argparse.Namespace, out: Output) -> int:
    stream = store.follow(args.run_id, after=args.after, timeout=args.timeout)
    if args.events:
        from agentloops.events import EventReplay, event_to_dict

        info = store.run_info(args.run_id)
        replay = EventReplay(loop=info.kind, read=store.read)
        for record in store.read(args.run_id, limit=args.after) if args.after else ():
            replay.events(record)  # seen already: counted in the totals, not printed
        for record in stream:
            for event in replay.events(record):
                data = event_to_dict(event)
                if out.as_json:
                    out.data({"seq": record.seq, **data})
                else:
                    out.line(f"{record.seq:>5}  {data['event']}  {_event_line(data)}")
        return 0
    for record in stream:
        if out.as_json:
            out.data(rows.record_json(record))
        else:
            out.line("  ".join(str(c) for c in rows.record_row(record)))
    return 0


def _event_line(data: dict[str, Any]) -> str:
    shown = {k: v for k, v in data.items() if k not in ("event", "at", "loop", "run_id")}
    return short(shown, 100)


def decide_call(store: RunStore, args: argparse.Namespace, out: Output) -> int:
    waits = {w.call_id: w for w in waiting(store, args.run_id)}
    record = decide(store, args.run_id, args.call_id, args.choice, by=args.by, reason=args.reason)
    if out.as_json:
        out.data({"recorded": record is not None, "record": record and rows.record_json(record)})
        return 0
    if record is None:
        out.line(f"call {args.call_id} of run {args.run_id}: decided so already; nothing added")
        return 0
    w = waits.get(args.call_id)
    shown = f"{w.call.name} {json.dumps(w.call.args, sort_keys=True)}" if w else args.call_id
    out.line(f"recorded (record {record.seq}): {rows.describe(record)}")
    out.line(f"  call {args.call_id}: {shown}")  # whole: the arguments decided on
    out.line(f"the next resume of {args.run_id!r}, in a process with its tools, applies it")
    return 0


def delete(store: RunStore, args: argparse.Namespace, out: Output) -> int:
    deleted = store.delete(args.run_id, force=args.force)
    if out.as_json:
        out.data({"deleted": deleted})
    else:
        out.line(f"deleted run {args.run_id}" if deleted else f"no run {args.run_id!r}")
    return 0 if deleted else 3
