"""A run's fingerprint: what its machine's decisions depend on (system prompts, tool names
and schemas, limits), kept in the run's header when it starts and compared when it is
resumed, so a resume under other settings is refused, naming what changed, instead of
replaying one transcript under two prompts.

Each loop says what goes into its fingerprint (`{part: value}`); the runner keeps and
checks it, once for all loops. The header keeps numbers, booleans, `None` and short
words as they are, so a change can be shown (`max_steps 20 -> 30`), longer text and
structures as a short hash, and a mapping (the tools) as one entry per key.

Rule: pure functions over JSON values (and a `ToolRegistry`'s specs); no store, no driver,
no loop.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from agentloops.errors import CheckpointError, ConfigurationError
from agentloops.model import OutputSchema
from agentloops.tools import ToolRegistry

Parts = Mapping[str, object]
"""What a loop's fingerprint is made of: part name to value (its `ToolRegistry` for the tools,
the `OutputSchema` of its `output_type`)."""

_HASHED = "h:"
_SHOWN = 32
"""Text up to this long is kept as it is (a setting's word), longer text as a hash."""


def condensed(parts: Parts) -> dict[str, Any]:
    """The fingerprint as the header keeps it. A `ToolRegistry` counts as its tools' names
    and input schemas, without the schemas' titles and descriptions (text for people, and
    what pydantic versions word differently), and its toolsets by where they come from: a
    toolset's tools may change while a run goes on (an MCP server re-lists them), so they
    are the server's to decide, not the run's. An `OutputSchema` (a typed run's) counts as
    its name and its schema, bare as the tools' are."""
    return {name: _condense(value, nested=True) for name, value in parts.items()}


def _tools(registry: ToolRegistry) -> dict[str, Any]:
    tools: dict[str, Any] = {t.name: _bare(t.spec().input_schema) for t in registry.registered}
    tools |= {ts.source: "a toolset" for ts in registry.toolsets}
    return tools


def _bare(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _bare(v) for k, v in schema.items() if k not in ("title", "description")}
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema


def _condense(value: object, *, nested: bool) -> Any:
    if isinstance(value, ToolRegistry):
        value = _tools(value)
    elif isinstance(value, OutputSchema):
        value = {"name": value.name, "schema": _bare(value.schema)}
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and len(value) <= _SHOWN and not value.startswith(_HASHED):
        return value
    if nested and isinstance(value, Mapping):
        return {str(k): _condense(v, nested=False) for k, v in value.items()}
    text = json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    return _HASHED + hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def changes(kept: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, str]:
    """Part name to what changed in it, for the parts both fingerprints have (a part one
    of them lacks came or went with another agentloops version, and is not compared)."""
    found = {}
    for name in kept.keys() & now.keys():
        old, new = kept[name], now[name]
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            found[name] = _entries(name, old, new)
        elif _shown(old) and _shown(new):
            found[name] = f"{name} {old!r} -> {new!r}"
        else:
            found[name] = f"{name} changed"
    return dict(sorted(found.items()))


def _entries(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    what = [f"{k!r} added" for k in sorted(new.keys() - old.keys())]
    what += [f"{k!r} removed" for k in sorted(old.keys() - new.keys())]
    what += [f"{k!r} changed" for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]
    return f"{name}: {', '.join(what)}"


def _shown(value: Any) -> bool:
    return not (isinstance(value, str) and value.startswith(_HASHED))


def check(
    run_id: str, meta: Mapping[str, Any], parts: Parts, allow_changes: Collection[str]
) -> tuple[dict[str, Any], list[str]] | None:
    """Compare the loop's fingerprint with the one the run's header keeps.

    Returns `None` when there is nothing to record, or `(fingerprint, changed)`: the
    fingerprint the header should keep from now on, and the parts that changed (empty for
    a run whose header keeps none yet: a format 1 journal).

    Raises:
        ConfigurationError: `allow_changes` names a part this loop's fingerprint lacks.
        CheckpointError: a part changed that `allow_changes` does not name.
    """
    unknown = sorted(set(allow_changes) - parts.keys())
    if unknown:
        raise ConfigurationError(
            f"allow_changes names {unknown}, not part of this loop's fingerprint: {sorted(parts)}"
        )
    now = condensed(parts)
    kept = meta.get("fingerprint")
    if not isinstance(kept, Mapping):
        return now, []
    changed = changes(kept, now)
    refused = {name: why for name, why in changed.items() if name not in allow_changes}
    if refused:
        raise CheckpointError(
            f"run {run_id!r} does not match this loop, whose settings differ from the run's "
            f"(the run's -> the loop's: {'; '.join(refused.values())}). Resume it with a loop "
            f"built as the run's, or with allow_changes={sorted(changed)} to go on under the "
            "loop's settings",
            run_id=run_id,
            field="fingerprint",
        )
    if not changed:
        return None
    return {**kept, **now}, sorted(changed)
