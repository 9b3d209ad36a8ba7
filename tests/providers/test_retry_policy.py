"""`RetryPolicy`: the statuses it retries, its waits, and both providers obeying it."""

from __future__ import annotations

import email.utils
import time

import anthropic
import httpx
import pytest
import respx
from _anthropic_helpers import error, reply, text

from agentloops import (
    AnthropicModel,
    ConfigurationError,
    ContextWindowExceeded,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatModel,
    RetryPolicy,
)
from agentloops.providers.retry import RETRY_STATUSES

REQUEST = ModelRequest("", [Message.user("q")])


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 520, 529, 599])
def test_the_default_retries_the_statuses_it_always_did(status: int) -> None:
    assert RetryPolicy().retries(status)


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 413, 422])
def test_the_default_leaves_the_callers_mistakes_alone(status: int) -> None:
    assert not RetryPolicy().retries(status)


def test_unanswered_requests_are_retried_unless_told_not_to() -> None:
    assert RetryPolicy().retries(None)
    assert not RetryPolicy(retry_unanswered=False).retries(None)


def test_x_should_retry_overrides_the_status() -> None:
    policy = RetryPolicy()
    assert not policy.retries(529, {"x-should-retry": "false"})
    assert policy.retries(400, {"x-should-retry": "true"})


def test_waits_double_with_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff=0.5, max_backoff=8.0, jitter=0.25)
    for attempt, full in enumerate([0.5, 1.0, 2.0, 4.0, 8.0, 8.0]):
        wait = policy.wait(attempt)
        assert full * 0.75 <= wait <= full
    assert RetryPolicy(jitter=0).wait(2) == 2.0


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "99999"}, 60.0),  # capped at max_retry_after
        ({"retry-after": "-5"}, 0.0),
    ],
)
def test_retry_after_is_honoured_and_capped(headers: dict[str, str], wait: float) -> None:
    assert RetryPolicy().wait(0, headers) == wait


def test_retry_after_as_a_date_and_as_garbage() -> None:
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= RetryPolicy().wait(0, {"retry-after": soon}) <= 30
    assert 0.375 <= RetryPolicy().wait(0, {"retry-after": "soon-ish"}) <= 0.5
    assert 0.375 <= RetryPolicy().wait(0, {"retry-after": "nan"}) <= 0.5


def test_next_wait_stops_at_max_retries_and_before_a_deadline() -> None:
    policy = RetryPolicy(max_retries=2, jitter=0)
    assert policy.next_wait(0, 503) == 0.5
    assert policy.next_wait(1, 503) == 1.0
    assert policy.next_wait(2, 503) is None  # out of retries
    assert policy.next_wait(0, 400) is None  # not retryable
    assert policy.next_wait(0, 503, remaining=0.4) is None  # no time to wait and try


def test_the_worst_case_is_every_try_timing_out() -> None:
    # 4 tries of 120 s, and the waits between them: 0.5 + 1 + 2
    assert RetryPolicy().worst_case(120.0) == 4 * 120 + 3.5


@pytest.mark.parametrize(
    "kwargs",
    [{"max_retries": -1}, {"backoff": -1}, {"jitter": 2}, {"max_retry_after": -1}],
)
def test_a_policy_that_makes_no_sense_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retry_on_is_kept_as_a_frozenset() -> None:
    assert RetryPolicy(retry_on=[429, 529]).retry_on == frozenset({429, 529})
    assert RetryPolicy().retry_on == RETRY_STATUSES


# -- the providers obey it -----------------------------------------------------------------

BASE = "http://llm.test/v1"


def test_openai_compat_retries_only_what_its_policy_says() -> None:
    waits: list[float] = []
    policy = RetryPolicy(max_retries=5, retry_on={529})
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions")
        route.side_effect = [httpx.Response(529), httpx.Response(503)]
        model = OpenAICompatModel(BASE, "m", retry=policy, sleep=waits.append)
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    assert route.call_count == 2 and len(waits) == 1
    assert (info.value.status, info.value.kind) == (503, "unavailable")
    assert model.max_retries == 5


def test_openai_compat_max_retries_is_a_shorthand_and_not_both() -> None:
    assert OpenAICompatModel(BASE, "m", max_retries=1).retry == RetryPolicy(max_retries=1)
    assert OpenAICompatModel(BASE, "m").retry == RetryPolicy()
    with pytest.raises(ConfigurationError, match="not both"):
        OpenAICompatModel(BASE, "m", max_retries=1, retry=RetryPolicy())


def test_openai_compat_a_429_carries_its_retry_after() -> None:
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(
            return_value=httpx.Response(429, headers={"retry-after": "7"})
        )
        model = OpenAICompatModel(BASE, "m", retry=RetryPolicy(max_retries=0))
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    assert (info.value.kind, info.value.retry_after) == ("rate_limited", 7.0)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": {"code": "context_length_exceeded", "message": "too long"}}),
        (400, {"error": {"message": "This model's maximum context length is 4096 tokens"}}),
        (400, {"error": {"type": "exceed_context_size_error", "message": "no room"}}),
        (500, {"error": {"message": "Requested tokens (5000) exceed context window of 2048"}}),
    ],
)
def test_openai_compat_a_full_context_window_is_its_own_error_and_not_retried(
    status: int, body: dict[str, object]
) -> None:
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(status, json=body)
        )
        model = OpenAICompatModel(BASE, "m", sleep=lambda s: None)
        with pytest.raises(ContextWindowExceeded) as info:
            model.complete(REQUEST)
    assert route.call_count == 1
    assert info.value.kind == "context_window" and isinstance(info.value, ModelError)


def test_anthropic_takes_the_policy_and_turns_the_sdks_own_retries_off(
    messages_route: respx.Route,
) -> None:
    messages_route.side_effect = [
        error(503, "api_error", "down"),
        error(529, "overloaded_error", "busy"),
    ]
    client = anthropic.Anthropic(api_key="test-key", max_retries=5)
    model = AnthropicModel(client=client, retry=RetryPolicy(max_retries=1))
    with pytest.raises(ModelError) as info:
        model.complete(REQUEST)
    assert messages_route.call_count == 2  # the policy's 1 retry, not the client's 5
    assert (info.value.status, info.value.kind) == (529, "overloaded")
    assert model.client is client and client.max_retries == 5  # the caller's client untouched


def test_anthropic_keeps_the_clients_retry_count_by_default(messages_route: respx.Route) -> None:
    messages_route.side_effect = [error(500, "api_error", "x")] * 2 + [reply(text("ok"))]
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key", max_retries=2))
    assert model.retry == RetryPolicy(max_retries=2)
    assert model.complete(REQUEST).message.text == "ok"
    assert messages_route.call_count == 3


def test_anthropic_a_prompt_too_long_is_a_context_window_error(messages_route: respx.Route) -> None:
    messages_route.mock(
        return_value=error(
            400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000"
        )
    )
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key"))
    with pytest.raises(ContextWindowExceeded, match="prompt is too long"):
        model.complete(REQUEST)
    assert messages_route.call_count == 1


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, "auth"), (403, "auth"), (404, "not_found"), (429, "rate_limited"), (400, "bad_request")],
)
def test_anthropic_errors_say_their_kind(
    messages_route: respx.Route, status: int, kind: str
) -> None:
    messages_route.mock(return_value=error(status, "some_error", "no"))
    model = AnthropicModel(
        client=anthropic.Anthropic(api_key="test-key"), retry=RetryPolicy(max_retries=0)
    )
    with pytest.raises(ModelError) as info:
        model.complete(REQUEST)
    assert info.value.kind == kind


def test_anthropic_a_connection_error_is_unavailable(messages_route: respx.Route) -> None:
    messages_route.side_effect = httpx.ConnectError("refused")
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key", max_retries=0))
    with pytest.raises(ModelError) as info:
        model.complete(REQUEST)
    assert info.value.kind == "unavailable"


# -- a request's timeout (what is left of a run's deadline) --------------------------------


def timed(seconds: float) -> ModelRequest:
    return ModelRequest("", [Message.user("q")], timeout=seconds)


def test_openai_compat_no_retry_waits_past_the_requests_timeout() -> None:
    waits: list[float] = []
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(503, headers={"retry-after": "5"})
        )
        model = OpenAICompatModel(BASE, "m", sleep=waits.append)
        with pytest.raises(ModelError) as info:
            model.complete(timed(1.0))
    assert route.call_count == 1 and waits == []  # a 5 s wait would pass the 1 s left
    assert info.value.status == 503


def test_openai_compat_each_try_gets_at_most_what_is_left() -> None:
    with respx.mock(base_url=BASE) as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(200, json=completion_body("ok"))
        )
        OpenAICompatModel(BASE, "m").complete(timed(2.5))
        OpenAICompatModel(BASE, "m").complete(REQUEST)
    limited, default = (c.request.extensions["timeout"] for c in route.calls)
    assert 0 < limited["read"] <= 2.5
    assert default["read"] == 300.0  # the plain reply's default


def test_openai_compat_a_spent_timeout_sends_nothing() -> None:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        route = router.post("/chat/completions")
        with pytest.raises(ModelError, match="ran out") as info:
            OpenAICompatModel(BASE, "m").complete(timed(0.0))
    assert route.call_count == 0 and info.value.kind == "timeout"


def test_openai_compat_a_timed_out_try_is_a_timeout_error() -> None:
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(side_effect=httpx.ReadTimeout("slow"))
        model = OpenAICompatModel(BASE, "m", retry=RetryPolicy(max_retries=0))
        with pytest.raises(ModelError) as info:
            model.complete(REQUEST)
    assert info.value.kind == "timeout"


def test_anthropic_no_retry_waits_past_the_requests_timeout(messages_route: respx.Route) -> None:
    busy = error(529, "overloaded_error", "Overloaded")
    busy.headers["retry-after-ms"] = "5000"
    messages_route.mock(return_value=busy)
    model = AnthropicModel(client=anthropic.Anthropic(api_key="test-key", max_retries=3))
    with pytest.raises(ModelError, match="Overloaded"):
        model.complete(timed(1.0))
    assert messages_route.call_count == 1
    sent = messages_route.calls[0].request
    assert float(sent.headers["x-stainless-timeout"]) <= 1.0  # the call's own timeout


def completion_body(content: str) -> dict[str, object]:
    message = {"role": "assistant", "content": content}
    return {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }
