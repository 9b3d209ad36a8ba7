"""Replies, tools and requests shared by the OpenAICompatModel tests."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pydantic
import respx

from agentloops import Message, ModelRequest, tool

BASE = "http://llm.test/v1"
KEY = "sk-CANARY-0123456789abcdef"


def completion(
    content: str | None = None,
    *,
    calls: list[dict[str, Any]] | None = None,
    finish: str | None = "stop",
    usage: dict[str, Any] | None = None,
    **message: Any,
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if calls is not None:
        msg["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "qwen3:8b",
        "choices": [{"index": 0, "finish_reason": finish, "message": msg}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def call(name: str, arguments: Any, id: str | None = "call_1") -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        entry["id"] = id
    return entry


def ok(body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=body)


def sent(route: respx.Route, i: int = -1) -> dict[str, Any]:
    return json.loads(route.calls[i].request.content)


class Sleeps(list[float]):
    """Records the waits between retries instead of waiting (sync and async)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.append(seconds)


weather_calls: list[str] = []


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    weather_calls.append(city)
    return f"18C in {city}"


@tool
def now() -> str:
    """The current time."""
    return "12:00"


def ask(text: str = "hi", **kw: Any) -> ModelRequest:
    return ModelRequest("", [Message.user(text)], **kw)


class City(pydantic.BaseModel):
    name: str
    population: int
