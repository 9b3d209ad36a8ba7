"""Fixtures for the OpenAICompatModel tests: a respx-mocked server and a model on it."""

from __future__ import annotations

import pytest
import respx
from _openai_fakes import BASE, KEY, Sleeps, weather_calls

from agentloops import OpenAICompatModel


@pytest.fixture
def server():
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router.post("/chat/completions")


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def model(sleeps: Sleeps):
    with OpenAICompatModel(
        BASE, "qwen3:8b", api_key=KEY, sleep=sleeps, async_sleep=sleeps.asleep
    ) as m:
        yield m


@pytest.fixture(autouse=True)
def _reset_calls():
    weather_calls.clear()
