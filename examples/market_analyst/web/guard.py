"""What the API accepts and how it refuses: JSON bodies sent by this page only, and every
refusal as `{"error": message}` with a status, which the page shows as written (a run
held by another process: 409, with its lease's holder and expiry).

A body is read only up to `MAX_BODY_BYTES`: one declared longer is refused (413) before a
byte of it is read, and one sent in chunks as soon as it passes the cap. Its JSON may
nest `MAX_DEPTH` levels at most (400), so no route meets the interpreter's recursion
limit in the parser or after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentloops import RunLeased
from market_analyst.journal import lease_message
from market_analyst.store import NoDraftYet, UnknownRun
from market_analyst.trades import UnknownTrade

MAX_BODY_BYTES = 1 << 20
"""The largest body read: far more than any request, profile or edited report needs."""
MAX_DEPTH = 20
"""How deep a body's JSON may nest (the page sends flat objects)."""


class BadInput(ValueError):
    """A request body the API refuses; the message is shown in the page."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def error(message: str, status: int, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


async def json_body(request: Request) -> dict[str, Any]:
    """The JSON object a state-changing request carries, from this page only."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise BadInput(f"requests from {origin} are not accepted", 403)
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise BadInput("send JSON (Content-Type: application/json)", 415)
    raw = await _capped(request)
    too_deep = f"The body nests deeper than {MAX_DEPTH} levels; it is refused."
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadInput("the body is not valid JSON") from None
    except RecursionError:
        raise BadInput(too_deep) from None
    if _depth(body) > MAX_DEPTH:
        raise BadInput(too_deep)
    if not isinstance(body, dict):
        raise BadInput("the body must be a JSON object")
    return body


async def _capped(request: Request) -> bytes:
    """The body, read only while it stays within `MAX_BODY_BYTES`."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadInput(
            f"The body is {int(declared):,} bytes; at most {MAX_BODY_BYTES:,} are accepted.", 413
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise BadInput(
                f"The body is longer than {MAX_BODY_BYTES:,} bytes, the most accepted.", 413
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _depth(value: Any) -> int:
    """How deep `value` nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            if depth < MAX_DEPTH:  # deeper is refused anyway: stop counting
                stack.extend(
                    (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
                )
    return deepest


def text_field(body: dict[str, Any], name: str, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str):
        raise BadInput(f"{name!r} must be a string")
    return value


def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    """`handler` with the API's errors turned into JSON answers the page shows."""

    async def endpoint(request: Request) -> Response:
        try:
            response: Response = await handler(request)
        except BadInput as exc:
            return error(str(exc), exc.status)
        except (UnknownRun, UnknownTrade) as exc:
            return error(str(exc), 404)
        except NoDraftYet as exc:
            return error(str(exc), 409)
        except RunLeased as exc:  # another process (or this server) works on it now
            lease = {"holder": exc.holder, "until": exc.until.isoformat()}
            return error(lease_message(exc), 409, lease=lease)
        except ValueError as exc:  # the analyst's own checks (an unknown mode, holdings)
            return error(str(exc), 400)
        return response

    return endpoint
