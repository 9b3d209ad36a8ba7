"""Record the replay corpus from the scenarios of loops.py: a script run by hand, never by
`make test`.

    python tests/replay/record.py             # record the scenarios that have no file yet
    python tests/replay/record.py --check     # how today's recording differs from the files
    python tests/replay/record.py --out DIR   # a new generation: every scenario, into DIR

It never rewrites a file: a corpus file is a run from yesterday and stays as it was. A
replay that fails means the change broke old runs; re-recording would only hide that.
When the journal format changes, record a new generation next to the old ones (the
default folder is named by the format the journals say they are in). See
docs/durability.md, "Old runs keep resuming".
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `replay` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import agentloops
from agentloops import CallInDoubt, MemoryStore
from replay import journals
from replay.loops import LOOPS, Ledger, ProcessDied
from replay.scenarios import SCENARIOS, Scenario


def record(scenario: Scenario) -> dict[str, Any]:
    """Run `scenario` into a fresh store the way it says, and return its corpus document.

    Each session (the run, then each resume) gets a loop of its own, as another process
    would; one ends when its process dies or when the run waits for a person."""
    store = MemoryStore()
    ledger = Ledger(die_in=scenario.die_in)
    sessions = [lambda loop: loop.run(scenario.task, run_id=scenario.run_id)]
    for decisions in scenario.resumes:
        sessions.append(lambda loop, d=decisions: loop.resume(scenario.run_id, d))
    for session in sessions:
        with contextlib.suppress(ProcessDied, CallInDoubt):
            session(LOOPS[scenario.loop](store, ledger))
    if ledger.die_in is not None:
        raise AssertionError(f"{scenario.name}: the process never died in {ledger.die_in}")
    return {
        "scenario": scenario.name,
        "recorded_by": f"agentloops {agentloops.__version__}",
        **journals.dump(store, scenario.run_id),
        "expect": scenario.expect,
    }


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A document without what differs from one recording to the next: the store's
    timestamps, the holder ids decision records name (`host:pid:random`), how long calls
    took, the run's nonce (format 2) and the checksums chained from it, and the order in
    which calls running at once started and finished (the threads' choice): each stretch
    of tool records between two others is sorted."""
    nonce = doc["run"]["meta"].get("nonce")
    if nonce:  # in the header, and in the idempotency keys an error may quote
        doc = json.loads(json.dumps(doc).replace(nonce, "<nonce>"))
    records = []
    for r in doc["records"]:
        data = r["data"]
        if "by" in data:
            data = {**data, "by": "<holder>"}
        if "outcome" in data:
            data = {**data, "outcome": {**data["outcome"], "seconds": "<seconds>"}}
        if "sum" in data:
            data = {**data, "sum": "<sum>"}
        if "seconds" in data:  # a model call's, or a step's (an event record)
            data = {**data, "seconds": "<seconds>"}
        records.append({**r, "at": "<at>", "data": data})
    ordered: list[dict[str, Any]] = []
    for is_tool, group in itertools.groupby(records, key=_in_a_stretch):
        stretch = list(group)
        if is_tool:
            seqs = [r["seq"] for r in stretch]
            stretch = [
                {**r, "seq": seq}
                for r, seq in zip(sorted(stretch, key=_by_call), seqs, strict=True)
            ]
        ordered.extend(stretch)
    return {"run": doc["run"], "records": ordered}


_TOOL_KINDS = ("tool_started", "tool_finished", "event")
_STEP_EVENTS = ("StepStarted", "StepFinished")


def _in_a_stretch(record: dict[str, Any]) -> bool:
    """A tool call's record, or a step's event: the threads order these."""
    if record["kind"] == "event":
        return record["data"].get("event") in _STEP_EVENTS
    return record["kind"] in _TOOL_KINDS


def _by_call(record: dict[str, Any]) -> tuple[str, int, str]:
    data = record["data"]
    key = record["key"] or data.get("step_id", "")
    return (key, _TOOL_KINDS.index(record["kind"]), data.get("event", ""))


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What today's recording `new` holds that the file `old` does not, record by record."""
    a, b = comparable(old), comparable(new)
    found = [f"header: {a['run']} != {b['run']}"] if a["run"] != b["run"] else []
    for i in range(max(len(a["records"]), len(b["records"]))):
        x = a["records"][i] if i < len(a["records"]) else None
        y = b["records"][i] if i < len(b["records"]) else None
        if x != y:
            found.append(f"record {i + 1}: {x} != {y}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="a new generation's folder (default: by format)")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--corpus", type=Path, default=journals.CORPUS, help="for --check")
    args = parser.parse_args(argv)
    docs = [record(s) for s in SCENARIOS]
    if args.check:
        return _check(docs, args.corpus)
    for doc in docs:
        folder = args.out or journals.CORPUS / f"format-{doc['run']['meta']['format']}"
        path = folder / f"{doc['scenario']}.json"
        if path.exists():
            print(f"kept     {path} (a corpus file is never rewritten)")
            continue
        journals.write(path, doc)
        print(f"recorded {path}")
    return 0


def _check(docs: list[dict[str, Any]], corpus: Path) -> int:
    """Print how each corpus file differs from today's recording of its scenario; 1 if any
    does (a difference is news, not a failure: old files are kept as they are)."""
    today = {doc["scenario"]: doc for doc in docs}
    status = 0
    for path in journals.files(corpus):
        old = journals.read(path)
        if old["scenario"] not in today:
            print(f"{path}: no scenario {old['scenario']!r} in loops.py")
            status = 1
            continue
        found = differences(old, today[old["scenario"]])
        print(f"{path}: {'as today records it' if not found else 'differs from today'}")
        for line in found:
            print(f"  {line}")
        status = status or int(bool(found))
    return status


if __name__ == "__main__":
    sys.exit(main())
