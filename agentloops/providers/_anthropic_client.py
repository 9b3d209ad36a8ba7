"""The SDK clients behind an `AnthropicModel`: built with credentials checked up front,
one kind built from the other's settings, and those credentials kept out of errors.

Rule: no request or reply logic here; the SDK is imported only when a client is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentloops import _secrets
from agentloops._secrets import SHORTEST, in_url
from agentloops.errors import AgentLoopsError, ConfigurationError

if TYPE_CHECKING:
    import anthropic

    Client = anthropic.Anthropic | anthropic.AsyncAnthropic

KEY = "[api key]"
"""What a credential is replaced with in errors (shorter than `SHORTEST`: not looked for)."""


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
    """The credentials of `client` (if any) to blank out of error text: its key or token,
    and any put in its base URL (a password, a `?key=` parameter)."""
    if client is None:
        return ()
    found = {client.api_key or "", client.auth_token or "", *in_url(str(client.base_url))}
    return tuple(s for s in found if len(s) >= SHORTEST)


def scrub(
    error: AgentLoopsError, *causes: BaseException, secrets: tuple[str, ...]
) -> AgentLoopsError:
    """Blank `secrets` out of `error` and of the SDK exception it wraps (a server may echo
    the key in an error body, and a printed traceback shows the cause too)."""
    for exc in (error, *causes):
        _secrets.scrub(exc, secrets, KEY)
    return error


def shown(client: Client) -> str:
    """`client`'s base URL as an error shows it: user information and keys blanked."""
    return _secrets.url(str(client.base_url).rstrip("/"), KEY)
