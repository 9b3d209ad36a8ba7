"""The SDK clients behind an `AnthropicModel`: built with credentials checked up front,
one kind built from the other's settings, and those credentials kept out of errors.

Rule: no request or reply logic here; the SDK is imported only when a client is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloops.errors import AgentLoopsError, ConfigurationError

if TYPE_CHECKING:
    import anthropic

    Client = anthropic.Anthropic | anthropic.AsyncAnthropic

_MIN_SECRET = 8
"""Shorter credentials are not looked for in error text (they would match ordinary words)."""


def default_client(sdk: Any, api_key: str | None) -> anthropic.Anthropic:
    """The client for `api_key`, or for the environment's credentials; failing now, with
    the variable to set, rather than with the SDK's TypeError at the first request."""
    try:
        client: anthropic.Anthropic = sdk.Anthropic(api_key=api_key)
    except sdk.AnthropicError as exc:  # a profile named or configured but unreadable
        raise ConfigurationError(f"AnthropicModel could not load credentials: {exc}") from exc
    if client.api_key is None and client.auth_token is None and client.credentials is None:
        raise ConfigurationError(
            "AnthropicModel found no Anthropic credentials: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_AUTH_TOKEN), pass api_key=..., or pass client=anthropic.Anthropic(...)"
        )
    return client


def settings_of(client: Client | None) -> dict[str, Any]:
    """What a client of the other kind (sync, async) needs to reach the same API as
    `client`: its key or token, base URL, timeout and retries. Custom headers, proxies
    and HTTP clients are not carried over."""
    assert client is not None
    settings: dict[str, Any] = {
        "base_url": client.base_url,
        "timeout": client.timeout,
        "max_retries": client.max_retries,
    }
    if client.api_key is not None:
        settings["api_key"] = client.api_key
    elif client.auth_token is not None:
        settings["auth_token"] = client.auth_token
    return settings


def secrets_of(client: Client | None) -> tuple[str, ...]:
    """The credentials of `client` (if any) to blank out of error text."""
    if client is None:
        return ()
    return tuple(s for s in (client.api_key, client.auth_token) if s and len(s) >= _MIN_SECRET)


def scrub(
    error: AgentLoopsError, *causes: BaseException, secrets: tuple[str, ...]
) -> AgentLoopsError:
    """Blank `secrets` out of `error` and of the SDK exception it wraps (a server may echo
    the key in an error body, and a printed traceback shows the cause too)."""
    for exc in (error, *causes):
        exc.args = tuple(_redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
        if isinstance(getattr(exc, "message", None), str):
            exc.message = _redact(exc.message, secrets)  # type: ignore[attr-defined]
    return error


def _redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[api key]")
    return text
