"""`FallbackModel`: the next model answers when one fails in a way it may fix, never after
the caller's own mistake; streams fall back only before their first delta; the response,
the events and the journal name who answered and who failed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
import respx
from _anthropic_helpers import error, reply, text

from agentloops import (
    AnthropicModel,
    ConfigurationError,
    ContextWindowExceeded,
    FallbackModel,
    Message,
    ModelCallFinished,
    ModelError,
    ModelRequest,
    ModelResponse,
    OpenAICompatModel,
    RetryPolicy,
    TextDelta,
)
from agentloops.journal import MemoryStore
from agentloops.testing import ScriptedModel, respond

REQUEST = ModelRequest("", [Message.user("q")])
BASE = "http://llm.test/v1"


def named(name: str, script: list[Any]) -> ScriptedModel:
    model = ScriptedModel(script)
    model.model = name  # type: ignore[attr-defined]
    return model


def busy() -> ModelError:
    return ModelError("Overloaded", status=529)


def test_an_overloaded_model_falls_back_and_the_reply_names_who_answered() -> None:
    first, second = named("big", [busy()]), named("small", ["hello"])
    response = FallbackModel([first, second]).complete(REQUEST)
    assert response.message.text == "hello"
    assert [(a.model, a.kind) for a in response.attempts] == [("big", "overloaded")]
    assert "Overloaded" in response.attempts[0].error
    assert response.model == "scripted"  # the provider's own name for the model is kept
    assert (first.calls, second.calls) == (1, 1)


def test_a_reply_without_a_model_name_gets_the_members() -> None:
    answer = ModelResponse(Message("assistant", ()), "end_turn")
    chain = FallbackModel([named("a", [busy()]), named("b", [answer])])
    assert chain.complete(REQUEST).model == "b"


@pytest.mark.parametrize(
    "failure",
    [
        ModelError("rate limited", status=429),
        ModelError("down", status=503),
        ModelError("timed out", kind="timeout"),
        ModelError("refused", kind="unavailable"),
        ContextWindowExceeded("prompt is too long", status=400),
    ],
)
def test_the_default_falls_back_on_what_the_next_model_may_fix(failure: ModelError) -> None:
    chain = FallbackModel([named("a", [failure]), named("b", ["ok"])])
    assert chain.complete(REQUEST).message.text == "ok"


@pytest.mark.parametrize(
    "failure",
    [
        ModelError("bad request", status=400),
        ModelError("invalid key", status=401),
        ModelError("forbidden", status=403),
        ModelError("no such model", status=404),
        ModelError("garbled", kind="bad_reply"),
    ],
)
def test_no_fallback_on_the_callers_mistake(failure: ModelError) -> None:
    second = named("b", ["never"])
    with pytest.raises(ModelError) as info:
        FallbackModel([named("a", [failure]), second]).complete(REQUEST)
    assert info.value is failure
    assert second.calls == 0


def test_fallback_on_takes_kinds_classes_or_a_predicate() -> None:
    auth = ModelError("expired key", status=401)
    assert FallbackModel([named("a", [auth]), named("b", ["ok"])], fallback_on={"auth"}).complete(
        REQUEST
    )
    chain = FallbackModel(
        [named("a", [ContextWindowExceeded("long")]), named("b", ["ok"])],
        fallback_on=[ContextWindowExceeded],
    )
    assert chain.complete(REQUEST).message.text == "ok"
    only_429 = FallbackModel(
        [named("a", [busy()]), named("b", ["ok"])], fallback_on=lambda e: e.status == 429
    )
    with pytest.raises(ModelError, match="Overloaded"):
        only_429.complete(REQUEST)


def test_when_every_model_fails_the_error_lists_every_failure() -> None:
    chain = FallbackModel(
        [named("a", [busy()]), named("b", [ModelError("down", status=503)]), named("c", [busy()])]
    )
    with pytest.raises(ModelError, match="all 3 models failed") as info:
        chain.complete(REQUEST)
    err = info.value
    assert [(name, e.kind) for name, e in err.failures] == [
        ("a", "overloaded"),
        ("b", "unavailable"),
        ("c", "overloaded"),
    ]
    assert (err.kind, err.status) == ("overloaded", 529)
    assert "a: overloaded: Overloaded; b: unavailable: down" in str(err)


def test_a_mistake_after_a_fallback_carries_the_failures_before_it() -> None:
    bad = ModelError("bad request", status=400)
    with pytest.raises(ModelError) as info:
        FallbackModel([named("a", [busy()]), named("b", [bad])]).complete(REQUEST)
    assert info.value is bad
    assert [name for name, _ in info.value.failures] == ["a"]


def test_a_chain_needs_a_model_and_sensible_rules() -> None:
    with pytest.raises(ConfigurationError, match="at least one"):
        FallbackModel([])
    with pytest.raises(ConfigurationError, match="fallback_on"):
        FallbackModel([named("a", [])], fallback_on=[3])  # type: ignore[list-item]


def test_the_next_model_gets_what_is_left_of_the_calls_time() -> None:
    seen: list[float | None] = []

    def slow_failure(request: ModelRequest) -> ModelResponse:
        seen.append(request.timeout)
        raise busy()

    def answer(request: ModelRequest) -> ModelResponse:
        seen.append(request.timeout)
        return respond("ok")

    chain = FallbackModel([named("a", [slow_failure]), named("b", [answer])])
    chain.complete(ModelRequest("", [Message.user("q")], timeout=30.0))
    assert seen[0] == 30.0 and seen[1] is not None and 29.0 < seen[1] <= 30.0


def test_acomplete_falls_back_too() -> None:
    chain = FallbackModel([named("a", [busy()]), named("b", ["ok"])])
    response = asyncio.run(chain.acomplete(REQUEST))
    assert response.message.text == "ok" and len(response.attempts) == 1


class Sync:
    """A client with `complete` only (no async, no stream)."""

    model = "plain"

    def __init__(self, answer: str):
        self.answer = answer

    def complete(self, request: ModelRequest) -> ModelResponse:
        return respond(self.answer)


def test_members_without_async_or_streams_are_called_through_complete() -> None:
    chain = FallbackModel([named("a", [busy()]), Sync("plain answer")])
    assert asyncio.run(chain.acomplete(REQUEST)).message.text == "plain answer"
    streamed = list(FallbackModel([named("a", [busy()]), Sync("s")]).stream(REQUEST))
    assert isinstance(streamed[-1], ModelResponse) and streamed[-1].message.text == "s"

    async def collect() -> list[Any]:
        return [p async for p in FallbackModel([named("a", [busy()]), Sync("t")]).astream(REQUEST)]

    assert asyncio.run(collect())[-1].message.text == "t"


class Breaks:
    """Streams one delta, then fails as overloaded (a mid-stream `error` event)."""

    model = "breaks"

    def complete(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> Iterator[Any]:
        yield TextDelta(text="Par")
        raise busy()

    async def astream(self, request: ModelRequest) -> AsyncIterator[Any]:
        yield TextDelta(text="Par")
        raise busy()


def test_a_stream_that_fails_before_its_first_delta_falls_back() -> None:
    items = list(FallbackModel([named("a", [busy()]), named("b", ["Paris."])]).stream(REQUEST))
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == "Paris."
    assert items[-1].attempts[0].model == "a"


def test_a_stream_that_fails_mid_way_does_not_fall_back() -> None:
    second = named("b", ["never"])
    got: list[Any] = []
    with pytest.raises(ModelError, match="Overloaded"):
        for item in FallbackModel([Breaks(), second]).stream(REQUEST):
            got.append(item)
    assert got == [TextDelta(text="Par", at=got[0].at, ts=got[0].ts)]
    assert second.calls == 0


def test_an_async_stream_falls_back_only_before_its_first_delta() -> None:
    async def collect(chain: FallbackModel) -> list[Any]:
        return [p async for p in chain.astream(REQUEST)]

    items = asyncio.run(collect(FallbackModel([named("a", [busy()]), named("b", ["ok"])])))
    assert items[-1].message.text == "ok"
    with pytest.raises(ModelError, match="Overloaded"):
        asyncio.run(collect(FallbackModel([Breaks(), named("b", ["never"])])))


def test_a_member_stream_that_ends_without_a_response_falls_back() -> None:
    class Empty(Sync):
        def stream(self, request: ModelRequest) -> Iterator[Any]:
            return iter(())

    chain = FallbackModel([Empty("x"), named("b", ["ok"])])
    items = list(chain.stream(REQUEST))
    assert items[-1].message.text == "ok"
    assert "ended without a final response" in items[-1].attempts[0].error


# -- in loops: events, drivers, the journal ------------------------------------------------


def test_events_name_each_attempt_under_both_drivers(ReActLoop: Any) -> None:
    events: list[Any] = []
    chain = FallbackModel([named("a", [busy()]), named("b", ["ok"])])
    result = ReActLoop(chain, [], on_event=events.append).run("q")
    assert result.answer == "ok"
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [(a.model, a.kind) for a in finished[0].attempts] == [("a", "overloaded")]


def test_a_resumed_run_does_not_ask_again_and_keeps_who_answered(ReActLoop: Any) -> None:
    from agentloops import tool

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return "published"

    store = MemoryStore()
    calls = [("publish", {"text": "hi"})]
    from agentloops.testing import use_tools

    first = named("a", [busy(), busy()])
    second = named("b", [use_tools(*calls), "done"])
    loop = ReActLoop(FallbackModel([first, second]), [publish], store=store)
    paused = loop.run("go", run_id="r1")
    assert paused.stop_reason == "approval_required"
    record = next(r for r in store.read("r1") if r.kind == "model")
    assert record.data["response"]["attempts"][0]["model"] == "a"
    resumed = loop.resume("r1", {paused.pending_approvals[0].id: True})
    assert resumed.answer == "done"
    assert (first.calls, second.calls) == (2, 2)  # the first call was not made again


# -- real providers over respx: Claude overloaded, the OpenAI-compatible server answers ---


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


def sse(content: str) -> httpx.Response:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}],
    }
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    import json

    body = "".join(f"data: {json.dumps(c)}\n\n" for c in (chunk, end)) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def providers() -> FallbackModel:
    claude = AnthropicModel(
        client=anthropic.Anthropic(api_key="test-key"), retry=RetryPolicy(max_retries=1)
    )
    local = OpenAICompatModel(BASE, "gpt-4o-mini", retry=RetryPolicy(max_retries=0))
    return FallbackModel([claude, local])


def test_claude_529_then_the_openai_compatible_server_answers(
    ReActLoop: Any, messages_route: respx.Route
) -> None:
    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded")] * 2
    with respx.mock(base_url=BASE) as router:
        server = router.post("/chat/completions").mock(
            return_value=httpx.Response(200, json=completion("Paris."))
        )
        events: list[Any] = []
        result = ReActLoop(providers(), [], on_event=events.append).run("Capital of France?")
    assert result.answer == "Paris."
    assert messages_route.call_count == 2 and server.call_count == 1  # Claude's retry, then on
    finished = next(e for e in events if isinstance(e, ModelCallFinished))
    assert finished.model == "gpt-4o-mini"
    assert [(a.model, a.kind) for a in finished.attempts] == [("claude-sonnet-5", "overloaded")]


@pytest.mark.parametrize("way", ["stream", "astream"])
def test_claude_529_then_the_other_server_streams(messages_route: respx.Route, way: str) -> None:
    from agentloops import ReActLoop

    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded")] * 2
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(return_value=sse("Paris."))
        loop = ReActLoop(providers(), [])
        if way == "stream":
            items = list(loop.stream("Capital of France?"))
        else:

            async def collect() -> list[Any]:
                return [i async for i in loop.astream("Capital of France?")]

            items = asyncio.run(collect())
    assert items[-1].answer == "Paris."
    assert [i.text for i in items if isinstance(i, TextDelta)] == ["Paris."]
    finished = next(i for i in items if isinstance(i, ModelCallFinished))
    assert finished.attempts[0].kind == "overloaded"


def test_claude_400_does_not_fall_back(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=error(400, "invalid_request_error", "bad thing"))
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        server = router.post("/chat/completions")
        with pytest.raises(ModelError, match="bad thing") as info:
            providers().complete(REQUEST)
    assert info.value.kind == "bad_request"
    assert messages_route.call_count == 1 and server.call_count == 0


def test_both_providers_failing_lists_both(messages_route: respx.Route) -> None:
    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded")] * 2
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(
            return_value=httpx.Response(503, json={"error": "down"})
        )
        with pytest.raises(ModelError, match="all 2 models failed") as info:
            asyncio.run(providers().acomplete(REQUEST))
    assert [e.status for _, e in info.value.failures] == [529, 503]
    assert isinstance(info.value.__cause__, ModelError)


def test_reply_helpers_are_what_claude_sends(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=reply(text("hi")))
    assert providers().complete(REQUEST).message.text == "hi"
