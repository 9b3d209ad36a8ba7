"""Carry out a plan of attempts: one blocking driver, one async; the plan decides, they do I/O.

A plan (`Attempts`, not `Plan`: that is Plan-and-Execute's) is a generator (see
`OpenAICompatModel._attempts`) that yields `Send` (post this body) or `Wait` (sleep this
long) and is sent back each answer: the `httpx.Response` (its body read, also for a stream
that failed), or the transport error raised instead.
It returns the first good response. So retrying and adapting are written once, and these
two functions are the only difference between the sync and the async paths.

Rule: the only I/O of the OpenAI-compatible client; it decides nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True)
class Send:
    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    """Seconds this try may take (`None`: the HTTP client's own timeout)."""


@dataclass(frozen=True, slots=True)
class Wait:
    seconds: float


Attempts = Generator["Send | Wait", "httpx.Response | Exception | None", "httpx.Response"]


def drive(
    plan: Attempts,
    client: httpx.Client,
    sleep: Callable[[float], object],
    errors: tuple[type[Exception], ...],
) -> httpx.Response:
    step = next(plan)
    while True:
        answer: httpx.Response | Exception | None = None
        if isinstance(step, Wait):
            sleep(step.seconds)
        else:
            try:
                answer = _post(client, step)
            except errors as exc:
                answer = exc
        try:
            step = plan.send(answer)
        except StopIteration as done:
            response: httpx.Response = done.value
            return response


async def adrive(
    plan: Attempts,
    client: httpx.AsyncClient,
    sleep: Callable[[float], Awaitable[object]],
    errors: tuple[type[Exception], ...],
) -> httpx.Response:
    step = next(plan)
    while True:
        answer: httpx.Response | Exception | None = None
        if isinstance(step, Wait):
            await sleep(step.seconds)
        else:
            try:
                answer = await _apost(client, step)
            except errors as exc:
                answer = exc
        try:
            step = plan.send(answer)
        except StopIteration as done:
            response: httpx.Response = done.value
            return response


def _post(client: httpx.Client, send: Send) -> httpx.Response:
    stream = bool(send.body.get("stream"))
    request = client.build_request("POST", send.url, json=send.body, headers=send.headers)
    _limit(request, send.timeout)
    response = client.send(request, stream=stream)
    if stream and response.status_code >= 400:
        try:
            response.read()  # the error body decides what happens next
        finally:
            response.close()
    return response


async def _apost(client: httpx.AsyncClient, send: Send) -> httpx.Response:
    stream = bool(send.body.get("stream"))
    request = client.build_request("POST", send.url, json=send.body, headers=send.headers)
    _limit(request, send.timeout)
    response = await client.send(request, stream=stream)
    if stream and response.status_code >= 400:
        try:
            await response.aread()
        finally:
            await response.aclose()
    return response


def _limit(request: httpx.Request, seconds: float | None) -> None:
    """Give one request its own timeout (connect, read, write and pool alike)."""
    if seconds is not None:
        request.extensions["timeout"] = {
            "connect": seconds,
            "read": seconds,
            "write": seconds,
            "pool": seconds,
        }
