"""`Exchange`, one recorded request and its answer, and a cassette file read back into
exchanges: checked as it is read, so a hand edit gone wrong is a `CassetteError` naming
the exchange and the field, never a raw `KeyError` or `TypeError` at replay.

Rule: plain data and its checks; no transport, no recorder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from agentloops.errors import CassetteError

VERSION = 1
"""The cassette file format this agentloops writes and reads."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Exchange:
    """One request and what came back."""

    method: str
    url: str
    request: Any = None
    """The request body: its JSON value, or its text when it is not JSON."""
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    """The response body as text (a whole server-sent event stream included)."""
    error: str = ""
    """`"ReadTimeout: ..."` when the transport raised instead of answering."""


_FIELDS = tuple(f.name for f in fields(Exchange))
_TEXT = ("method", "url", "body", "error")


def read(text: str, name: str) -> tuple[dict[str, Any], list[Exchange]]:
    """The meta and the exchanges of the cassette file `name` holding `text`.

    Raises:
        CassetteError: the file is not a version 1 cassette, or an exchange is unusable.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CassetteError(f"{name}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CassetteError(f"{name}: a cassette is a JSON object, got {_kind(data)}")
    if data.get("version") != VERSION:
        raise CassetteError(
            f"{name}: not a version {VERSION} cassette (version={data.get('version')!r})",
            field="version",
        )
    meta = data.get("meta")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CassetteError(f"{name}: 'meta' must be an object, got {_kind(meta)}", field="meta")
    raw = data.get("exchanges")
    if not isinstance(raw, list):
        raise CassetteError(
            f"{name}: 'exchanges' must be a list, got {_kind(raw)}", field="exchanges"
        )
    return meta, [_exchange(name, n, e) for n, e in enumerate(raw, 1)]


def _exchange(name: str, number: int, raw: Any) -> Exchange:
    def bad(field_: str, why: str) -> CassetteError:
        where = f"{name}: exchange {number}" + (f", field {field_!r}" if field_ else "")
        return CassetteError(f"{where}: {why}", exchange=number, field=field_)

    if not isinstance(raw, dict):
        raise bad("", f"an exchange is a JSON object, got {_kind(raw)}")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise bad(unknown[0], f"not a field of an exchange (fields: {', '.join(_FIELDS)})")
    for key in ("method", "url"):
        if key not in raw:
            raise bad(key, "missing")
    for key in _TEXT:
        if key in raw and not isinstance(raw[key], str):
            raise bad(key, f"must be a string, got {_kind(raw[key])}")
    if not raw["method"] or not raw["url"]:
        raise bad("method" if not raw["method"] else "url", "must not be empty")
    status = raw.get("status", 0)
    if type(status) is not int:
        raise bad("status", f"must be an int, got {_kind(status)}")
    if not raw.get("error") and not 100 <= status <= 599:  # an answer needs its status
        raise bad("status", f"must be an HTTP status from 100 to 599, got {status}")
    headers = raw.get("headers", {})
    if not isinstance(headers, dict):
        raise bad("headers", f"must be an object, got {_kind(headers)}")
    for key, value in headers.items():
        if not isinstance(value, str):
            raise bad("headers", f"header {key!r} must be a string, got {_kind(value)}")
    return Exchange(**raw)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
