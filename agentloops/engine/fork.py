"""Forks: a new durable run whose journal is an old one's up to a record, one outcome
optionally replaced, going on live from there. The old run is left untouched.

A fork copies records `1..at` of the source run into a new run (the same loop, the same
task), rewriting every run id they hold (record keys, `run` fields: the source's own and
its sub-runs', `"src.1"` -> `"new.1"`) so that the fork's replay finds its outcomes, and
its new calls get idempotency keys of their own. With `replace`, record `at` itself is
replaced: a model record by another answer (a `ModelResponse`, or text), a tool's result
by another (a `ToolOutcome`, or text), a decision by another choice. What no longer has a
reason to be there is left out: a call that had started and not finished by `at` (the
fork runs it live, under its own key). The fork's header meta says where it came from:
`forked_from = {"run_id", "at", "replaced"}`. Each copied record loses the source's
checksum (`engine._chain`): the fork's session seals it into the fork's own chain.

Rule: journal records in, journal entries out, and one store write to start the fork; it
knows the record kinds `engine.durable` writes, never a loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentloops.engine import _codec
from agentloops.engine._chain import FIELD
from agentloops.engine.decisions import DOUBT_CHOICES, choice_of
from agentloops.engine.durable import DOUBT
from agentloops.errors import ConfigurationError
from agentloops.journal.records import Entry, JournalRecord
from agentloops.messages import Message, ToolOutcome
from agentloops.model import ModelResponse

Replacement = ModelResponse | ToolOutcome | str | bool
"""What `fork(..., replace=)` takes, by the kind of record `at`: a model record takes a
`ModelResponse` (or text: an answer that ends the turn), a `tool_finished` a `ToolOutcome`
(or text: a successful result), a decision True/False/"approve"/"deny", a decision on a
call in doubt "rerun"/"skip"."""

REPLACEABLE = ("model", "tool_finished", "decision", DOUBT)


def fork_entries(
    past: Sequence[JournalRecord],
    *,
    source: str,
    new: str,
    at: int,
    replace: Replacement | None = None,
    by: str = "fork",
) -> list[Entry]:
    """The fork's journal: records `1..at` of `past` (the source run's journal) with the run
    ids rewritten and record `at` replaced by `replace` (see the module doc).

    Raises:
        ConfigurationError: `at` is not a record of the run, `replace` is given for a
            record that holds no outcome, or is the wrong kind of value for it.
    """
    last = past[-1].seq if past else 0
    if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= last:
        raise ConfigurationError(
            f"at must be the seq of a record of run {source!r} (1..{last}), got {at!r}"
        )
    kept = [r for r in past if r.seq <= at]
    if replace is not None and kept[-1].kind not in REPLACEABLE:
        raise ConfigurationError(
            f"record {at} is a {kept[-1].kind!r} record, not an outcome: replace= takes the "
            f"seq of a {', '.join(REPLACEABLE)} record"
        )
    finished = {r.key for r in kept if r.kind in ("tool_finished", DOUBT)}
    entries: list[Entry] = []
    for r in kept:
        if r.kind == "tool_started" and r.key not in finished:
            continue  # it had not finished by `at`: the fork runs it live
        data = _renamed(r.data, source, new)
        data.pop(FIELD, None)  # the source's checksum: the fork's session seals its own
        if r.seq == at and replace is not None:
            data = _replaced(r, data, replace, by)
        key = None if r.key is None else _rename(r.key, source, new)
        entries.append((r.kind, data, key) if key is not None else (r.kind, data))
    return entries


def _replaced(
    record: JournalRecord, data: dict[str, Any], value: Replacement, by: str
) -> dict[str, Any]:
    kind = record.kind
    if kind == "model":
        response = _response(value, record.seq)
        return {**data, "response": _codec.response_to_dict(response), "replaced": True}
    if kind == "tool_finished":
        outcome = _outcome(value, record.seq)
        return {**data, "outcome": _codec.outcome_to_dict(outcome), "replaced": True}
    choice = choice_of(value, str(data.get("name", "")))
    doubt = kind == DOUBT
    if (choice in DOUBT_CHOICES) != doubt:
        takes = "'rerun' or 'skip'" if doubt else "True/'approve' or False/'deny'"
        raise ConfigurationError(f"record {record.seq} is a {kind!r} record: it takes {takes}")
    replaced = {**data, "approved": choice in ("approve", "rerun"), "by": by, "replaced": True}
    if doubt:
        replaced["choice"] = choice
    replaced.pop("reason", None)
    return replaced


def _response(value: Replacement, seq: int) -> ModelResponse:
    if isinstance(value, ModelResponse):
        return value
    if isinstance(value, str) and not isinstance(value, bool):
        return ModelResponse(Message.assistant(value), "end_turn", model="fork")
    raise ConfigurationError(
        f"record {seq} is a model answer: replace= takes a ModelResponse or text, "
        f"not {type(value).__name__}"
    )


def _outcome(value: Replacement, seq: int) -> ToolOutcome:
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, str):
        return ToolOutcome(content=value)
    raise ConfigurationError(
        f"record {seq} is a tool's result: replace= takes a ToolOutcome or text, "
        f"not {type(value).__name__}"
    )


def _rename(value: str, source: str, new: str) -> str:
    """`value` with the run id `source` at its start (alone, or before "." or ":") as `new`."""
    if value == source:
        return new
    if value.startswith(source) and value[len(source)] in ".:":
        return new + value[len(source) :]
    return value


def _renamed(data: Mapping[str, Any], source: str, new: str) -> dict[str, Any]:
    """`data` with its run ids (`run`, `run_id`, `parent_run_id`, `subrun` fields) renamed."""
    out = dict(data)
    for field in ("run", "run_id", "parent_run_id", "subrun"):
        if isinstance(out.get(field), str):
            out[field] = _rename(out[field], source, new)
    return out


def fork_meta(meta: Mapping[str, Any], *, source: str, at: int, replaced: bool) -> dict[str, Any]:
    """The fork's header meta: the source's, saying where the fork came from."""
    fields = {k: v for k, v in meta.items() if k != "forked_from"}
    return {**fields, "forked_from": {"run_id": source, "at": at, "replaced": replaced}}
