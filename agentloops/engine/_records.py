"""The records a durable run journals, as the engine reads them back: a schema per kind,
checked on every record as it is read, so a damaged journal is a `CheckpointError` naming
the run, the record's seq and the field, never a `KeyError` deep in a replay.

`checked(records, chain)` (or `checking`, as records stream in) is the one way the engine
reads a journal: the checksum chain (format 2, `engine._chain`) and each record's schema.
Kinds this version does not know pass unchecked: a kind is an open string, and replay
ignores what it does not know.

Rule: records and their schemas; no store, no driver, no loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, get_args

from agentloops.engine._chain import Chain
from agentloops.errors import CheckpointError
from agentloops.journal.records import JournalRecord
from agentloops.model import StopReason

STOP_REASONS = frozenset(get_args(StopReason))
"""A model response's `stop_reason`, normalised (`agentloops.model.StopReason`)."""


class _Number:
    """An int or a float (never a bool)."""


class _Count:
    """An int >= 0 (never a bool)."""


class _Any:
    """Any JSON value."""


class _Tagged:
    """An object whose field `tag` names which of `specs` it must match."""

    __slots__ = ("specs", "tag")

    def __init__(self, tag: str, specs: Mapping[str, dict[str, Any]]):
        self.tag, self.specs = tag, specs


# A spec is a type (`str`, `bool`, `dict`: a JSON object), `_Number`, `_Count`, `_Any`, a
# frozenset (one of these strings), `[spec]` (a list of such items), `{field: spec}` (an
# object with these fields; a name ending in "?" may be missing; other fields are allowed),
# or a `_Tagged` object.
_CALL = {"id": str, "name": str, "args": dict}
_BLOCK = _Tagged(
    "type",
    {
        "text": {"text": str},
        "tool_call": _CALL,
        "tool_result": {"call_id": str, "content": str, "is_error?": bool},
        "thinking": {"text": str, "signature": str},
        "redacted_thinking": {"data": str},
    },
)
_USAGE = {
    "input_tokens": _Count,
    "output_tokens": _Count,
    "cache_read_tokens": _Count,
    "cache_write_tokens": _Count,
}
_RESPONSE = {
    "message": {"role": frozenset(("user", "assistant")), "content": [_BLOCK]},
    "stop_reason": STOP_REASONS,
    "usage": _USAGE,
    "model": str,
    "output": _Any,
}
_DECISION = {"approved": bool, "name": str, "args": dict, "by?": str}

SCHEMAS: dict[str, tuple[dict[str, Any], bool]] = {
    # kind: (the data's schema, whether the record must have a key)
    "model": ({"run": str, "step": _Count, "response": _RESPONSE}, False),
    # A model call that failed; replayed as its error when a retry followed it.
    "model_failed": (
        {"run": str, "step": _Count, "error": {"message": str, "kind": str, "status?": _Count}},
        False,
    ),
    "tool_started": (_CALL, True),
    "tool_finished": (
        {
            "call_id": str,
            "name": str,
            "outcome": {"content": str, "is_error": bool, "seconds": _Number, "retry?": bool},
        },
        True,
    ),
    "approval_requested": ({"run": str, "calls": [_CALL]}, False),
    "decision": (_DECISION, True),
    "doubt_decision": (_DECISION, True),
    # An output validator's verdict: the value it kept (JSON), or its ModelRetry message.
    "output_checked": ({"run": str, "step": _Count, "value?": _Any, "retry?": str}, False),
    # A guard's verdict: the reason it tripped, or none (it passed).
    "guard_checked": (
        {"run": str, "step": _Count, "guard": str, "stage": str, "reason?": str},
        False,
    ),
    "settings_changed": ({"changed": [str], "by": str}, False),
    "failed": ({"error": str}, False),
    "result": ({"stop_reason": str, "answer": str}, False),
}
"""What each kind of record a durable run writes holds."""


def checked(records: Iterable[JournalRecord], chain: Chain | None) -> list[JournalRecord]:
    """`records` (a run's journal, from its first record) once each is known good: each
    the next link of `chain` (the run's, `Chain.of` its header; `None` for a format 1
    journal, which has no checksums), and each of the shape its kind has.

    Raises:
        CheckpointError: the first record that is not, naming its seq and the field.
    """
    return list(checking(records, chain))


def checking(records: Iterable[JournalRecord], chain: Chain | None) -> Iterator[JournalRecord]:
    """`checked` as records are consumed: each one is checked when it is reached, so a
    journal read a page at a time is checked page by page (the same errors, raised when
    the first bad record comes)."""
    for record in records:
        if chain is not None:
            chain.verify(record)
        check(record)
        yield record


def check(record: JournalRecord) -> None:
    """Raise `CheckpointError` unless `record` has the shape its kind has."""
    known = _CHECKS.get(record.kind)
    if known is None:
        return
    ok, keyed = known
    if keyed and type(record.key) is not str:
        raise bad(record, "key", f"expected a string (the call's key), got {_show(record.key)}")
    if ok(record.data):
        return
    problem = _problem(record.data, SCHEMAS[record.kind][0], "")  # where, and why
    if problem is not None:
        field, why = problem
        raise bad(record, field, why)


def bad(record: JournalRecord, field: str, why: str) -> CheckpointError:
    """The error for a damaged record: the run, the record's seq and kind, the field."""
    return CheckpointError(
        f"run {record.run_id!r}: journal record {record.seq} ({record.kind}) is damaged: "
        f"field {field!r}: {why}",
        run_id=record.run_id,
        seq=record.seq,
        field=field,
    )


def _compiled(spec: Any) -> Callable[[Any], bool]:
    """`spec` as a predicate: whether a value matches it (the quick check every record
    gets on every read; `_problem` says where one does not)."""
    if isinstance(spec, dict):
        fields = [(n.rstrip("?"), n.endswith("?"), _compiled(inner)) for n, inner in spec.items()]

        def an_object(value: Any) -> bool:
            if type(value) is not dict:
                return False
            for name, optional, inner in fields:
                if name in value:
                    if not inner(value[name]):
                        return False
                elif not optional:
                    return False
            return True

        return an_object
    if isinstance(spec, list):
        item = _compiled(spec[0])
        return lambda value: type(value) is list and all(map(item, value))
    if isinstance(spec, _Tagged):
        table = {tag: _compiled(inner) for tag, inner in spec.specs.items()}
        name = spec.tag

        def tagged(value: Any) -> bool:
            tag = value.get(name) if type(value) is dict else None
            inner = table.get(tag) if type(tag) is str else None
            return inner is not None and inner(value)

        return tagged
    if isinstance(spec, frozenset):
        return lambda value: type(value) is str and value in spec
    if spec is _Any:
        return lambda value: True
    if spec is _Count:
        return lambda value: type(value) is int and value >= 0
    if spec is _Number:
        return lambda value: type(value) is int or type(value) is float
    return lambda value: type(value) is spec


_CHECKS = {kind: (_compiled(spec), keyed) for kind, (spec, keyed) in SCHEMAS.items()}


def _problem(value: Any, spec: Any, path: str) -> tuple[str, str] | None:
    """`(field, why)` for the first part of `value` that does not match `spec`, or None."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return path or "data", f"expected an object, got {_show(value)}"
        for name, inner in spec.items():
            optional = name.endswith("?")
            name = name.rstrip("?")
            field = f"{path}.{name}" if path else name
            if name not in value:
                if optional:
                    continue
                return field, "missing"
            problem = _problem(value[name], inner, field)
            if problem is not None:
                return problem
        return None
    if isinstance(spec, list):
        if not isinstance(value, list):
            return path, f"expected a list, got {_show(value)}"
        for i, item in enumerate(value):
            problem = _problem(item, spec[0], f"{path}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(spec, _Tagged):
        tag = value.get(spec.tag) if isinstance(value, dict) else None
        inner = spec.specs.get(tag) if isinstance(tag, str) else None
        if inner is None:
            known = ", ".join(sorted(spec.specs))
            return f"{path}.{spec.tag}", f"expected one of {known}, got {_show(tag)}"
        return _problem(value, inner, path)
    if isinstance(spec, frozenset):
        if value in spec and isinstance(value, str):
            return None
        return path, f"expected one of {', '.join(sorted(spec))}, got {_show(value)}"
    return None if _is(value, spec) else (path, f"expected {_NAMES[spec]}, got {_show(value)}")


def _is(value: Any, spec: Any) -> bool:
    if spec is _Any:
        return True
    if isinstance(value, bool):
        return spec is bool
    if spec is _Count:
        return isinstance(value, int) and value >= 0
    if spec is _Number:
        return isinstance(value, int | float)
    return isinstance(value, spec)


_NAMES = {
    str: "a string",
    bool: "true or false",
    dict: "an object",
    _Count: "a whole number >= 0",
    _Number: "a number",
}


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
