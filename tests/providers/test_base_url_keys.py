"""A key put in a provider's base URL (a password, a `?key=` parameter) never shows in a
`ModelError` or a `repr`, on every error path of both providers; and a 404 from a base URL
that is likely wrong says what to try."""

from __future__ import annotations

import traceback
from typing import Any

import anthropic
import httpx
import pytest
import respx
from _anthropic_helpers import error

from agentloops import AnthropicModel, Message, ModelError, ModelRequest, OpenAICompatModel

SECRET = "sk-in-the-url-0123456789"
REQUEST = ModelRequest("", [Message.user("hi")], max_tokens=16)


def shown(exc: BaseException, model: Any) -> str:
    printed = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "\n".join([str(exc), repr(exc), printed, repr(model)])


def openai(base: str) -> OpenAICompatModel:
    return OpenAICompatModel(base, "m", max_retries=0, sleep=lambda s: None)


@pytest.mark.parametrize(
    "base", [f"http://user:{SECRET}@llm.test/v1", f"http://llm.test/v1?api_key={SECRET}"]
)
@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(401, json={"error": {"message": "who are you?"}}),
        httpx.Response(500, text="boom"),
        httpx.Response(200, text="not json"),
        httpx.ConnectError(f"cannot reach {SECRET}"),  # a transport error that names the URL
        httpx.ReadTimeout("slow"),
    ],
    ids=["401", "500", "bad-reply", "connect", "timeout"],
)
def test_a_key_in_the_openai_base_url_is_not_in_any_model_error(base: str, answer: Any) -> None:
    model = openai(base)
    with respx.mock(assert_all_called=False) as mock:
        mock.route().mock(side_effect=[answer])
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    text = shown(info.value, model)
    assert SECRET not in text
    assert "[api key]" in text


def test_a_key_in_the_openai_base_url_is_not_in_a_broken_stream_error() -> None:
    model = openai(f"http://user:{SECRET}@llm.test/v1")
    chunk = 'data: {"choices": [{"delta": {"content": "Hel"}}]}\n\ndata: {"error": "' + SECRET
    with respx.mock(assert_all_called=False) as mock:
        mock.route().mock(
            return_value=httpx.Response(
                200, text=chunk + '"}\n\n', headers={"content-type": "text/event-stream"}
            )
        )
        with pytest.raises(ModelError) as info:
            list(model.stream(REQUEST))
    assert SECRET not in shown(info.value, model)


@pytest.mark.parametrize(
    ("base", "hint"),
    [
        ("http://localhost:11434", "try base_url='http://localhost:11434/v1'"),
        ("http://localhost:11434/v1", None),  # a versioned base URL: the server's own 404
    ],
)
def test_an_openai_404_from_a_base_url_without_v1_says_to_try_v1(
    base: str, hint: str | None
) -> None:
    with respx.mock(assert_all_called=False) as mock:
        mock.route().mock(return_value=httpx.Response(404, text="model 'm' not found"))
        with pytest.raises(ModelError) as info:
            openai(base).complete(REQUEST)
    assert info.value.status == 404 and "model 'm' not found" in str(info.value)
    assert (hint in str(info.value)) if hint else "/v1:" not in str(info.value)


def anthropic_model(base: str) -> AnthropicModel:
    client = anthropic.Anthropic(api_key="sk-ant-key-0123456789", base_url=base, max_retries=0)
    return AnthropicModel(client=client)


def test_a_key_in_the_anthropic_base_url_is_not_in_its_model_error() -> None:
    model = anthropic_model(f"https://api.anthropic.test/?key={SECRET}")
    with respx.mock(using="httpcore2", assert_all_called=False) as mock:
        mock.route().mock(return_value=error(404, "not_found_error", f"no route {SECRET}"))
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    text = shown(info.value, model)
    assert SECRET not in text and "[api key]" in text


def test_an_anthropic_404_from_a_base_url_ending_in_v1_says_to_drop_it() -> None:
    model = anthropic_model("https://api.anthropic.test/v1")
    with respx.mock(using="httpcore2", assert_all_called=False) as mock:
        mock.route().mock(return_value=error(404, "not_found_error", "Not Found"))
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    assert "try base_url='https://api.anthropic.test'" in str(info.value)
