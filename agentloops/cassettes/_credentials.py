"""A request's own credentials, so a recording never keeps them and a replay matches the
recording whatever key the replaying client holds.

What counts (`agentloops._secrets`): the values of the `Authorization` header and of any
header named for a key, token, secret or password (`x-api-key`, `api-key`...), a Basic
credential's password, and the URL's password and credential query parameters. The URL's
are replaced by name; the others wherever their text appears (a server that echoes the
key in an error body or a header), if at least `SHORTEST` characters long.

Rule: knows httpx requests only; no cassette, no provider.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

import httpx

from agentloops._secrets import SHORTEST, clean, in_url, is_credential, url

__all__ = ["clean", "clean_value", "secrets", "url"]


def secrets(request: httpx.Request) -> set[str]:
    """The credential values `request` carries (each at least `SHORTEST` characters)."""
    found = in_url(str(request.url))
    for name, value in request.headers.items():
        if is_credential(name):
            scheme, _, token = value.partition(" ")
            token = token.strip()
            found.add(token or value)  # "Bearer sk-...": the scheme is no secret
            if token and scheme.lower() == "basic":
                found.update(_basic(token))
    return {s for s in found if len(s) >= SHORTEST}


def _basic(token: str) -> Iterable[str]:
    try:
        pair = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ()
    _, _, password = pair.partition(":")
    return (pair, password)


def clean_value(value: Any, found: Iterable[str]) -> Any:
    """A JSON value with `found` replaced in every string it holds (keys included)."""
    if isinstance(value, str):
        return clean(value, found)
    if isinstance(value, list):
        return [clean_value(v, found) for v in value]
    if isinstance(value, dict):
        return {clean(k, found): clean_value(v, found) for k, v in value.items()}
    return value
