"""A request's own credentials, so a recording never keeps them and a replay matches the
recording whatever key the replaying client holds.

What counts: the values of the `Authorization` and `Proxy-Authorization` headers and of
any header whose name says key, token, secret, password or auth (`x-api-key`,
`api-key`...), a Basic credential's password, the password in the URL, and the values of
query parameters named that way (`?key=`, `?api_key=`, `?sig=`). The URL's are replaced by
name; the others wherever their text appears (a server that echoes the key in an error
body or a header), if at least `SHORTEST` characters long: a shorter value is no secret
worth mangling the recording for.

Rule: knows httpx requests and URLs only; no cassette, no provider.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

import httpx

REDACTED = "[redacted]"
SHORTEST = 8
_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential", "signature")
_PARAMS = frozenset({"sig"})


def is_credential(name: str) -> bool:
    """Whether a header or query parameter with this name carries a credential."""
    lowered = name.lower()
    return lowered in _PARAMS or any(word in lowered for word in _WORDS)


def secrets(request: httpx.Request) -> set[str]:
    """The credential values `request` carries (each at least `SHORTEST` characters)."""
    found: set[str] = set()
    for name, value in request.headers.items():
        if is_credential(name):
            scheme, _, token = value.partition(" ")
            token = token.strip()
            found.add(token or value)  # "Bearer sk-...": the scheme is no secret
            if token and scheme.lower() == "basic":
                found.update(_basic(token))
    url = request.url
    if url.password:
        found.add(url.password)
    for name, value in url.params.multi_items():
        if is_credential(name):
            found.add(value)
    return {s for s in found if len(s) >= SHORTEST}


def _basic(token: str) -> Iterable[str]:
    try:
        pair = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ()
    _, _, password = pair.partition(":")
    return (pair, password)


def url(value: httpx.URL) -> httpx.URL:
    """`value` with its password and its credential query parameters replaced by name."""
    if value.password:
        value = value.copy_with(password=REDACTED)
    params = value.params
    if any(is_credential(name) for name in params):
        kept: list[tuple[str, str | int | float | bool | None]] = [
            (n, REDACTED if is_credential(n) else v) for n, v in params.multi_items()
        ]
        value = value.copy_with(params=httpx.QueryParams(kept))
    return value


def clean(text: str, found: Iterable[str]) -> str:
    """`text` with each of `found` (longest first) replaced by `REDACTED`."""
    for secret in sorted(found, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def clean_value(value: Any, found: Iterable[str]) -> Any:
    """A JSON value with `found` replaced in every string it holds (keys included)."""
    if isinstance(value, str):
        return clean(value, found)
    if isinstance(value, list):
        return [clean_value(v, found) for v in value]
    if isinstance(value, dict):
        return {clean(k, found): clean_value(v, found) for k, v in value.items()}
    return value
