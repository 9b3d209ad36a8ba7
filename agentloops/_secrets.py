"""Credentials found in URLs and header names, and blanked out of text and errors: the one
way the providers keep a key out of a `ModelError` and the cassettes out of a recording.

What counts as a credential: a URL's password; the value of a query parameter or header
whose name says key, token, secret, password, auth, credential or signature (`?key=`,
`?api_key=`, `x-api-key`, `Authorization`; and `sig`). Values are blanked out of other text
only if at least `SHORTEST` characters long: a shorter one would match ordinary words, and
is no secret worth mangling a message for.

Rule: a helper: plain strings and exceptions, nothing from agentloops, no httpx.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

E = TypeVar("E", bound=BaseException)

REDACTED = "[redacted]"
SHORTEST = 8
_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credential", "signature")
_NAMES = frozenset({"sig"})


def is_credential(name: str) -> bool:
    """Whether a header or query parameter with this name carries a credential."""
    lowered = name.lower()
    return lowered in _NAMES or any(word in lowered for word in _WORDS)


def in_url(url: str) -> set[str]:
    """The credentials `url` carries: its password (or a user name alone, as some put a key
    there) and its credential query parameters' values; each at least `SHORTEST` long."""
    parts = urlsplit(url)
    found = {parts.password or parts.username or ""}
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if value and is_credential(name):
            found.add(value.rstrip("/"))  # a client that appends "/" to its base URL
    return {s for s in found if len(s) >= SHORTEST}


def url(value: str, marker: str = REDACTED) -> str:
    """`value` with its user information and its credential query parameters' values
    replaced by `marker`, whatever their length; the rest of it as it was."""
    parts = urlsplit(value)
    netloc, query = parts.netloc, parts.query
    if "@" in netloc:
        netloc = f"{marker}@{netloc.rpartition('@')[2]}"
    if query:
        pairs = []
        for pair in query.split("&"):
            name, _, found = pair.partition("=")
            pairs.append(f"{name}={marker}" if found and is_credential(name) else pair)
        query = "&".join(pairs)
    if (netloc, query) == (parts.netloc, parts.query):
        return value
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def clean(text: str, found: Iterable[str], marker: str = REDACTED) -> str:
    """`text` with each of `found` (longest first) replaced by `marker`."""
    for secret in sorted(found, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, marker)
    return text


def scrub(error: E, found: Iterable[str], marker: str = REDACTED) -> E:
    """Blank `found` out of `error`'s text and of the exceptions behind it (its cause and
    context: a server may echo the key in an error body, and a traceback shows them too)."""
    found = tuple(found)
    if not found:
        return error
    seen: set[int] = set()
    exc: BaseException | None = error
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.args = tuple(clean(a, found, marker) if isinstance(a, str) else a for a in exc.args)
        message = getattr(exc, "message", None)
        if isinstance(message, str):
            with contextlib.suppress(AttributeError):  # a read-only property stays
                exc.message = clean(message, found, marker)  # type: ignore[attr-defined]
        exc = exc.__cause__ or exc.__context__
    return error
