"""Arguments checked against a server's JSON Schema before the call, with field-level errors.

The problems come out as a `pydantic.ValidationError`, the same error our own tools raise,
so the registry words them the same way for the model (`"b.c: should be of type 'string'
(got 3)"`) and ReWOO's plan check can treat placeholders as opaque. The validator is the
`jsonschema` package the MCP SDK already depends on, imported when a toolset lists tools.

Rule: JSON Schema and pydantic's error shape only; no tools, no MCP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic_core

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaViolation
    from jsonschema.protocols import Validator

MAX_PROBLEMS = 20
"""Problems reported per call; a wildly wrong call does not need a hundred lines."""


def validator(schema: dict[str, Any]) -> Validator | None:
    """A compiled validator for a tool's input schema, or `None` when the schema itself is
    not valid JSON Schema (the server then checks the arguments alone).

    `$ref`s resolve inside the schema only: nothing is fetched.
    """
    from jsonschema import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for
    from referencing import Registry

    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    return cls(schema, registry=Registry())


def check(check_with: Validator, args: dict[str, Any], title: str) -> None:
    """Raise a `pydantic.ValidationError` naming every field of `args` the schema refuses."""
    violations = sorted(check_with.iter_errors(args), key=lambda e: [str(p) for p in e.path])
    if not violations:
        return
    details: list[Any] = []
    for violation in violations:
        details.extend(_details(violation))
        if len(details) >= MAX_PROBLEMS:
            break
    raise pydantic_core.ValidationError.from_exception_data(title, details[:MAX_PROBLEMS])


def _details(violation: SchemaViolation) -> list[Any]:
    """One pydantic error detail per problem (a `required` violation may name several)."""
    loc = tuple(violation.absolute_path)
    kind, expected, value = violation.validator, violation.validator_value, violation.instance
    if kind == "required" and isinstance(value, dict):
        missing = [name for name in expected if name not in value]
        return [{"type": "missing", "loc": (*loc, name), "input": value} for name in missing]
    if kind == "additionalProperties" and isinstance(value, dict):
        known = violation.schema.get("properties", {})
        extra = [name for name in value if name not in known]
        if extra:
            return [
                {"type": "extra_forbidden", "loc": (*loc, name), "input": value[name]}
                for name in extra
            ]
    if kind == "type":
        message = f"should be of type {_listed(expected)}"
    elif kind == "enum":
        message = f"should be one of {_listed(expected)}"
    elif kind == "const":
        message = f"should be {expected!r}"
    else:
        message = violation.message
    error = pydantic_core.PydanticCustomError("json_schema", message)
    return [{"type": error, "loc": loc, "input": value}]


def _listed(expected: Any) -> str:
    if isinstance(expected, list):
        return " or ".join(repr(item) for item in expected)
    return repr(expected)
