"""Retries: which answers are retried, how long the client waits, and what it raises after."""

from __future__ import annotations

import re

import httpx
import pytest
from _openai_fakes import (
    BASE,
    ask,
    completion,
    ok,
)

from agentloops import (
    ModelError,
    OpenAICompatModel,
)
from agentloops.providers import _openai_http as http

# -- retries ---------------------------------------------------------------------------


def test_429_then_200_waits_as_long_as_retry_after_says(server, model, sleeps):
    server.side_effect = [
        httpx.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}}),
        httpx.Response(503, headers={"retry-after-ms": "250"}),
        ok(completion("fine")),
    ]
    assert model.complete(ask()).message.text == "fine"
    assert sleeps == [2.0, 0.25]
    assert server.call_count == 3


def test_500_until_the_retries_run_out_is_a_model_error(server, sleeps):
    server.side_effect = [
        httpx.Response(500, headers={"x-request-id": f"req_{i}"}, json={"error": "overloaded"})
        for i in range(3)
    ]
    m = OpenAICompatModel(BASE, "m", max_retries=2, sleep=sleeps)
    with pytest.raises(ModelError) as info:
        m.complete(ask())
    assert (info.value.status, info.value.request_id) == (500, "req_2")
    assert "HTTP 500 (after 3 attempts): overloaded" in str(info.value)
    assert server.call_count == 3
    assert len(sleeps) == 2
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0  # backoff with jitter


def test_an_error_body_of_another_shape_is_quoted(server, model):
    server.side_effect = [httpx.Response(404, json={"detail": "no such model"})]
    with pytest.raises(ModelError, match=re.escape('HTTP 404: {"detail": "no such model"}')):
        model.complete(ask())


def test_a_400_is_not_retried(server, model, sleeps):
    server.side_effect = [
        httpx.Response(400, headers={"request-id": "r1"}, json={"error": {"message": "bad"}})
    ]
    with pytest.raises(ModelError, match="HTTP 400: bad") as info:
        model.complete(ask())
    assert (info.value.status, info.value.request_id, server.call_count) == (400, "r1", 1)
    assert sleeps == []


def test_a_connection_error_is_retried(server, model, sleeps):
    server.side_effect = [httpx.ConnectError("refused"), ok(completion("up again"))]
    assert model.complete(ask()).message.text == "up again"
    assert len(sleeps) == 1


def test_connection_errors_until_the_retries_run_out_are_a_model_error(server, sleeps):
    server.side_effect = httpx.ReadTimeout("too slow")
    m = OpenAICompatModel(BASE, "m", max_retries=1, sleep=sleeps)
    with pytest.raises(ModelError, match="after 2 attempts: ReadTimeout: too slow") as info:
        m.complete(ask())
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)


@pytest.mark.parametrize(
    ("header", "wait"),
    [("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("soon", None), ("9999", 60.0), ("x", None)],
)
def test_retry_after_dates_garbage_and_huge_values(server, model, sleeps, header, wait):
    key = "retry-after-ms" if header == "x" else "retry-after"
    server.side_effect = [httpx.Response(429, headers={key: header}), ok(completion("ok"))]
    model.complete(ask())
    if wait is None:
        assert 0.375 <= sleeps[0] <= 0.5  # unusable header: plain backoff
    else:
        assert sleeps == [wait]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 520, 522, 529, 599, 408, 409, 429])
def test_every_5xx_and_408_409_429_is_retried(server, model, sleeps, status):
    server.side_effect = [httpx.Response(status, json={"error": "busy"}), ok(completion("ok"))]
    assert model.complete(ask()).message.text == "ok"
    assert server.call_count == 2 and len(sleeps) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_4xx_are_not_retried(server, model, sleeps, status):
    server.side_effect = [httpx.Response(status, json={"error": "no"})]
    with pytest.raises(ModelError, match=f"HTTP {status}"):
        model.complete(ask())
    assert server.call_count == 1 and sleeps == []


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (500, "Input should be 'text' or 'json_object' (response_format.type)", "response_format"),
        (400, "json_schema is not supported by this backend", "response_format"),
        (422, '{"detail": "RESPONSE_FORMAT: unknown"}', "response_format"),
        (400, "Use 'max_completion_tokens' instead.", "max_tokens"),
        (500, "Use 'max_completion_tokens' instead.", None),  # a 5xx is not about max_tokens
        (429, "response_format", None),  # a rate limit names no refused parameter
        (401, "response_format", None),
        (503, "overloaded", None),
        (200, "response_format", None),
    ],
)
def test_refusals_are_read_from_the_body(status, body, refused):
    assert http.refusal(status, body) == refused
