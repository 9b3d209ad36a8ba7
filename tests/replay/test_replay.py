"""Yesterday's runs resume today: every corpus journal, loaded into a store, gives its
recorded status and resumes to its expected answer, running nothing twice.

Each corpus file is loaded into a `MemoryStore` and into a SQLite file, and resumed under
both drivers. The same checks run on today's recording of every scenario (made here, in
memory), so the recorder keeps working for the day a new generation is needed; whether
today's records equal the files' is not checked (docs/durability.md says why).
"""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from agentloops import CallInDoubt, DecisionRefused, MemoryStore, RunStore, SQLiteStore
from replay import journals
from replay.loops import LOOPS, Ledger
from replay.record import differences, main, record
from replay.scenarios import SCENARIOS

FILES = journals.files()
CASES = [
    pytest.param(("file", path, backend), id=f"{path.relative_to(journals.CORPUS)}-{backend}")
    for path in FILES
    for backend in ("memory", "sqlite")
] + [  # today's recordings on one backend: the files show the backends agree
    pytest.param(("today", s.name, "memory"), id=f"today/{s.name}") for s in SCENARIOS
]


@cache
def _today(name: str) -> dict[str, Any]:
    return record(next(s for s in SCENARIOS if s.name == name))


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict[str, Any], RunStore]:
    """A recorded run (a corpus file, or today's recording) and an empty store for it."""
    source, what, backend = request.param
    doc = journals.read(what) if source == "file" else _today(what)
    if backend == "memory":
        return doc, MemoryStore()
    return doc, SQLiteStore(tmp_path / "runs.db", synchronous="NORMAL")


def _loaded(store: RunStore, doc: dict[str, Any]) -> tuple[Any, Ledger, str]:
    """The document's run in `store`, and its scenario's loop over that store."""
    run_id = journals.load(store, doc)
    ledger = Ledger()
    return LOOPS[doc["run"]["kind"]](store, ledger), ledger, run_id


def _calls(calls: list[Any]) -> list[dict[str, Any]]:
    return [{"id": c.id, "name": c.name, "args": c.args} for c in calls]


def _journal_keys(ran: list[list[str]], doc: dict[str, Any]) -> list[list[str]]:
    """The ledger's `[tool, idempotency key]`s with each key as the journal has it: from
    format 2 on, an idempotency key is the call's journal key, `@`, the run's nonce."""
    nonce = doc["run"]["meta"].get("nonce")
    suffix = f"@{nonce}" if nonce else ""
    assert all(key.endswith(suffix) for _, key in ran), ran
    return [[name, key[: len(key) - len(suffix)]] for name, key in ran]


def _check_result(result: Any, expect: dict[str, Any]) -> None:
    """`result` has every value `expect` names (the rest is the run's own business)."""
    for name, wanted in expect.items():
        if name in ("decisions", "asked", "ran"):
            continue  # what the resume is given, and what the ledger says
        if name == "pending":
            assert _calls(result.pending_approvals) == wanted
        elif name == "evidence":  # [content, is_error]; content None: not journaled
            assert list(result.evidence) == list(wanted)
            for step_id, (content, is_error) in wanted.items():
                outcome = result.evidence[step_id]
                assert outcome.is_error == is_error, step_id
                assert content is None or outcome.content == content, step_id
        else:
            assert getattr(result, name) == wanted, name


def test_every_scenario_has_a_corpus_file_and_every_file_a_scenario() -> None:
    recorded = {journals.read(p)["scenario"] for p in FILES}
    assert recorded == {s.name for s in SCENARIOS}


def test_a_corpus_journal_loads_into_a_store_record_for_record(case: Any) -> None:
    doc, store = case
    run_id = journals.load(store, doc)
    info = store.run_info(run_id)
    header = doc["run"]
    assert (info.kind, info.status, info.meta) == (header["kind"], header["status"], header["meta"])
    fields = ("seq", "kind", "key", "data")
    assert [{f: getattr(r, f) for f in fields} for r in store.read(run_id)] == [
        {f: r[f] for f in fields} for r in doc["records"]
    ]
    assert not info.leased


def test_status_gives_the_recorded_result_calling_nothing(case: Any) -> None:
    doc, store = case
    loop, ledger, run_id = _loaded(store, doc)
    _check_result(loop.status(run_id), doc["expect"]["status"])
    assert ledger.asked == [] and ledger.ran == []
    assert len(store.read(run_id)) == len(doc["records"])  # and wrote nothing


@pytest.mark.parametrize("driver", ["resume", "aresume"])
def test_resume_finishes_asking_only_for_what_the_journal_lacks(case: Any, driver: str) -> None:
    doc, store = case
    loop, ledger, run_id = _loaded(store, doc)
    expect = doc["expect"]

    def resume(decisions: dict[str, bool] | None) -> Any:
        if driver == "resume":
            return loop.resume(run_id, decisions)
        return asyncio.run(loop.aresume(run_id, decisions))

    decisions = expect["resume"]["decisions"]
    if "refused" in expect:  # a call in doubt: nothing runs until a person decides
        with pytest.raises(CallInDoubt) as info:
            resume(None)
        assert _calls(info.value.calls) == expect["refused"]
        assert ledger.asked == [] and ledger.ran == []
        decisions = _said_what_they_are(resume, decisions)
        assert ledger.asked == [] and ledger.ran == []
    result = resume(decisions)
    _check_result(result, expect["resume"])
    assert ledger.asked == expect["resume"]["asked"]
    ran = _journal_keys(ledger.ran, doc)
    assert ran == expect["resume"]["ran"]
    finished = {r["key"] for r in doc["records"] if r["kind"] == "tool_finished"}
    assert not [key for _, key in ran if key in finished]  # no recorded call ran again
    assert store.run_info(run_id).status == "finished"
    if doc["run"]["status"] == "finished":  # nothing to do: nothing written either
        assert len(store.read(run_id)) == len(doc["records"])


def _said_what_they_are(resume: Any, decisions: dict[str, Any]) -> dict[str, Any]:
    """Files recorded before decisions said what they are give True (an approval) for a
    call in doubt: refused today, because an approval is not a re-run; "rerun" runs it."""
    if not any(isinstance(v, bool) for v in decisions.values()):
        return decisions
    with pytest.raises(DecisionRefused, match=r"is in doubt.*say 'rerun'"):
        resume(decisions)
    said = {True: "rerun", False: "skip"}
    return {c: said[v] if isinstance(v, bool) else v for c, v in decisions.items()}


def test_the_recorder_writes_new_files_only_and_checks_them_against_today(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`record.py` never rewrites a file; `--check` compares the files with today's
    recording, modulo timestamps, holder ids and durations (for a person deciding on a
    new generation: the suite does not run it on the corpus)."""
    assert main(["--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.glob("*.json"))
    assert [p.stem for p in written] == sorted(s.name for s in SCENARIOS)
    before = [p.read_bytes() for p in written]
    assert main(["--out", str(tmp_path)]) == 0
    assert [p.read_bytes() for p in written] == before  # kept as they were
    assert "kept" in capsys.readouterr().out

    assert main(["--check", "--corpus", str(tmp_path)]) == 0  # two recordings agree
    assert capsys.readouterr().out.count("as today records it") == len(SCENARIOS)
    tampered = journals.read(written[0])
    tampered["records"][0]["data"]["step"] = 7
    journals.write(written[0], tampered)
    assert main(["--check", "--corpus", str(tmp_path)]) == 1
    assert f"{written[0]}: differs from today\n  record 1: " in capsys.readouterr().out


def test_differences_name_the_records_that_differ() -> None:
    doc = _today("react_paused")
    last = len(doc["records"])
    shorter = {**doc, "records": doc["records"][:-1]}
    assert [line.split(":")[0] for line in differences(shorter, doc)] == [f"record {last}"]
    moved = {**doc, "run": {**doc["run"], "status": "running"}}
    assert differences(moved, doc)[0].startswith("header: ")
