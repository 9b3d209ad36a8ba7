"""Journal records, runs and waiting calls as table rows and JSON for the command line.

Rule: it reads records by their kinds and fields (as `engine.durable` writes them); it
prints nothing and opens no store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentloops.cli.output import short
from agentloops.engine.decisions import Waiting
from agentloops.journal.records import JournalRecord, RunInfo

RUN_HEADERS = ("run", "kind", "status", "records", "leased by", "updated")
RECORD_HEADERS = ("seq", "at", "kind", "what")
WAITING_HEADERS = ("call", "tool", "arguments", "waits for", "decide with")


def run_row(info: RunInfo) -> tuple[Any, ...]:
    holder = info.holder if info.leased else ""
    return (info.run_id, info.kind, info.status, info.last_seq, holder, _time(info.updated_at))


def run_json(info: RunInfo) -> dict[str, Any]:
    return {
        "run_id": info.run_id,
        "kind": info.kind,
        "status": info.status,
        "meta": info.meta,
        "created_at": info.created_at.isoformat(),
        "updated_at": info.updated_at.isoformat(),
        "holder": info.holder if info.leased else None,
        "lease_expires_at": info.lease_expires_at.isoformat() if info.leased else None,  # type: ignore[union-attr]
        "epoch": info.epoch,
        "last_seq": info.last_seq,
    }


def record_row(record: JournalRecord) -> tuple[Any, ...]:
    return (record.seq, _time(record.at), record.kind, describe(record))


def record_json(record: JournalRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "seq": record.seq,
        "kind": record.kind,
        "key": record.key,
        "at": record.at.isoformat(),
        "data": record.data,
    }


def waiting_row(w: Waiting) -> tuple[Any, ...]:
    what = "approval (not run yet)" if w.why == "approval" else "doubt (started, no outcome)"
    flags = " | ".join(f"--{c}" for c in w.choices)
    return (w.call_id, w.call.name, _args(w.call.args, 200), what, flags)


def waiting_json(w: Waiting) -> dict[str, Any]:
    return {
        "call_id": w.call_id,
        "name": w.call.name,
        "args": w.call.args,
        "why": w.why,
        "choices": list(w.choices),
        "key": w.key,
        "seq": w.seq,
    }


def describe(record: JournalRecord) -> str:
    """One line saying what a record holds."""
    told = _DESCRIBE.get(record.kind)
    return short(told(record.data) if told else json.dumps(record.data, default=str), 100)


def _model(data: dict[str, Any]) -> str:
    response = data.get("response", {})
    blocks = response.get("message", {}).get("content", [])
    calls = [f"{b['name']}({_args(b.get('args', {}))})" for b in blocks if b["type"] == "tool_call"]
    text = " ".join(b.get("text", "") for b in blocks if b["type"] == "text")
    where = f"{data.get('role') or data.get('loop') or 'model'} step {data.get('step', '?')}"
    sub = f" [{data['run']}]" if "." in str(data.get("run", "")) else ""
    said = f"calls {', '.join(calls)}" if calls else repr(short(text, 50))
    return f"{where}{sub}: {response.get('stop_reason', '?')}, {said}"


def _started(data: dict[str, Any]) -> str:
    return f"{data['name']}({_args(data['args'])}) started, call {data['id']}"


def _finished(data: dict[str, Any]) -> str:
    outcome = data["outcome"]
    error = " (error)" if outcome["is_error"] else ""
    return f"{data['name']} -> {short(outcome['content'], 50)!r}{error}"


def _asked(data: dict[str, Any]) -> str:
    calls = ", ".join(f"{c['name']}({_args(c['args'])}) [{c['id']}]" for c in data["calls"])
    return f"asks approval for {calls}"


def _decision(data: dict[str, Any]) -> str:
    said = "approved" if data["approved"] else "denied"
    return f"{said} {data['name']} by {data.get('by', '?')}{_reason(data)}"


def _doubt(data: dict[str, Any]) -> str:
    said = "run again" if data["approved"] else "skipped (not run again)"
    return f"{data['name']} in doubt: {said}, by {data.get('by', '?')}{_reason(data)}"


def _event(data: dict[str, Any]) -> str:
    step = data.get("step_id") or data.get("step_number") or ""
    return f"{data.get('event', '?')} {step}".rstrip()


def _result(data: dict[str, Any]) -> str:
    return f"{data.get('stop_reason', '?')}: {short(data.get('answer', ''), 60)!r}"


def _failed(data: dict[str, Any]) -> str:
    return str(data.get("error", "failed"))


_DESCRIBE: dict[str, Callable[[dict[str, Any]], str]] = {
    "model": _model,
    "tool_started": _started,
    "tool_finished": _finished,
    "approval_requested": _asked,
    "decision": _decision,
    "doubt_decision": _doubt,
    "event": _event,
    "result": _result,
    "failed": _failed,
}


def _args(args: dict[str, Any], width: int = 40) -> str:
    return short(json.dumps(args, ensure_ascii=False, sort_keys=True)[1:-1], width)


def _reason(data: dict[str, Any]) -> str:
    return f": {data['reason']}" if data.get("reason") else ""


def _time(at: Any) -> str:
    return str(at.strftime("%Y-%m-%d %H:%M:%S"))
