"""A damaged journal is refused as it is read: each record is checked against its kind's
schema, and a bad one is a `CheckpointError` naming the run, the record's seq and the
field, never a raw `KeyError` or `AttributeError` from deep in a replay, and never a bad
value carried into the transcript (issue 19, bug 3).

The journals here are format 1 (no checksums), as an old run's would be: a format 2 record
edited by hand fails its checksum first (tests/engine/test_chain.py), so a format 2 one is
damaged here the way a buggy writer would do it: sealed, as the engine seals records.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from agentloops import CheckpointError, MemoryStore, ReActLoop, ToolCall, tool
from agentloops.engine._chain import Chain
from agentloops.engine.session import waiting
from agentloops.testing import ScriptedModel, use_tools


@tool
def look(key: str) -> str:
    """Look a key up."""
    return key.upper()


def recorded() -> list[tuple[str, dict[str, Any], str | None]]:
    """The records of a finished ReAct run with one tool call, as `(kind, data, key)`
    entries of run "r1" without checksums: model, tool_started, tool_finished, model,
    result."""
    source = MemoryStore()
    model = ScriptedModel([use_tools(ToolCall("c1", "look", {"key": "a"})), "A."])
    ReActLoop(model, [look], store=source).run("q", run_id="src")
    entries = []
    for r in source.read("src"):
        data = json.loads(json.dumps(r.data).replace('"src', '"r1'))
        data.pop("sum")
        entries.append((r.kind, data, None if r.key is None else r.key.replace("src", "r1")))
    return entries


def stored(entries: list[tuple[str, dict[str, Any], str | None]], *, sealed: bool = False) -> Any:
    """A store holding run "r1" with `entries` as its journal: format 1, or (`sealed`)
    format 2 with each record sealed into the run's chain."""
    store = MemoryStore()
    meta: dict[str, Any] = {"format": 1, "task": "q", "parent_run_id": None}
    if sealed:
        meta |= {"format": 2, "nonce": "0123456789ab"}
    lease = store.start("r1", kind="react", ttl=30, meta=meta)
    chain = Chain.of("r1", meta)
    if chain is not None:
        entries = chain.seal(entries)[0]  # type: ignore[arg-type]
    store.append_many(lease, entries, status="finished")
    store.release(lease)
    return store


Damage = Callable[[list[Any]], None]


def _set(seq: int, path: str, value: Any) -> Damage:
    """Set `path` (dotted, in record `seq`'s data) to `value`; `...` deletes it."""

    def damage(entries: list[Any]) -> None:
        *parents, last = path.split(".")
        node = entries[seq - 1][1]
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is ...:
            del node[last]
        else:
            node[last] = value

    return damage


def _unkeyed(seq: int) -> Damage:
    def damage(entries: list[Any]) -> None:
        kind, data, _ = entries[seq - 1]
        entries[seq - 1] = (kind, data, None)

    return damage


DAMAGED = [
    pytest.param(_set(1, "response.stop_reason", ...), 1, "response.stop_reason", id="no-stop"),
    pytest.param(_set(4, "run", ...), 4, "run", id="model-without-run"),
    pytest.param(_set(1, "response.message", 7), 1, "response.message", id="message-int"),
    pytest.param(_set(3, "outcome", ...), 3, "outcome", id="finished-without-outcome"),
    pytest.param(_set(3, "outcome.content", 42), 3, "outcome.content", id="content-int"),
    pytest.param(
        _set(1, "response.stop_reason", "exploded"), 1, "response.stop_reason", id="exploded"
    ),
    pytest.param(
        _set(4, "response.message.content.0.text", 5),
        4,
        "response.message.content[0].text",
        id="text-int",
    ),
    pytest.param(
        _set(1, "response.message.content.0.type", "hologram"),
        1,
        "response.message.content[0].type",
        id="block-type",
    ),
    pytest.param(_set(1, "response.usage.input_tokens", -3), 1, "response.usage.input_tokens"),
    pytest.param(_set(1, "step", True), 1, "step", id="step-bool"),
    pytest.param(_set(2, "args", "a"), 2, "args", id="args-text"),
    pytest.param(_unkeyed(2), 2, "key", id="started-without-key"),
    pytest.param(_set(3, "outcome.seconds", "fast"), 3, "outcome.seconds", id="seconds-text"),
    pytest.param(_set(5, "stop_reason", None), 5, "stop_reason", id="result-stop-none"),
]


@pytest.mark.parametrize("sealed", [False, True], ids=["format-1", "format-2"])
@pytest.mark.parametrize(("damage", "seq", "field"), DAMAGED)
@pytest.mark.parametrize("read", ["resume", "status"])
def test_a_damaged_record_is_a_checkpoint_error_naming_run_seq_and_field(
    damage: Damage, seq: int, field: str, read: str, sealed: bool
) -> None:
    entries = copy.deepcopy(recorded())
    damage(entries)
    store = stored(entries, sealed=sealed)
    loop = ReActLoop(ScriptedModel([]), [look], store=store)
    with pytest.raises(CheckpointError) as caught:
        getattr(loop, read)("r1")
    error = caught.value
    assert (error.run_id, error.seq, error.field) == ("r1", seq, field)
    assert f"run 'r1': journal record {seq} " in str(error) and repr(field) in str(error)
    assert not store.run_info("r1").leased  # and the lease a resume took is given back


def test_an_intact_old_journal_resumes_to_its_result() -> None:
    """The same journal, undamaged, in format 1: the check refuses nothing good."""
    store = stored(recorded())
    result = ReActLoop(ScriptedModel([]), [look], store=store).resume("r1")
    assert result.answer == "A." and result.messages[2].tool_results[0].content == "A"
    assert ReActLoop(ScriptedModel([]), [look], store=store).status("r1").answer == "A."


def test_waiting_checks_the_records_it_is_given() -> None:
    entries = recorded()[:2]  # the run's process died during its tool call
    entries[1][1]["args"] = ["not", "an", "object"]
    store = stored(entries)
    with pytest.raises(CheckpointError, match=r"record 2 \(tool_started\).*'args'"):
        waiting(store.read("r1"))


def test_a_kind_this_version_does_not_know_is_kept_and_ignored() -> None:
    """Kinds are an open string: a record of a kind from elsewhere (another driver, a newer
    agentloops of the same format) passes the check, and replay ignores it."""
    entries = recorded()
    entries.insert(3, ("annotation", {"note": 7}, None))
    store = stored(entries)
    assert ReActLoop(ScriptedModel([]), [look], store=store).resume("r1").answer == "A."
