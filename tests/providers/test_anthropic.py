"""AnthropicModel through the real anthropic SDK, with the HTTP layer mocked by respx.

Loops and `ask_structured` drive the model; the assertions read the request bodies the
SDK actually sent and the records that came back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import pydantic
import pytest
import respx
from _anthropic_helpers import (
    EPHEMERAL,
    REDACTED,
    SIGNATURE,
    THINKING,
    bodies,
    breakpoints,
    error,
    make_model,
    make_tools,
    reply,
    sse,
    streamed_text,
    text,
    tool_use,
)
from conftest import ANTHROPIC_API

from agentloops import (
    AnthropicModel,
    ConfigurationError,
    Message,
    ModelError,
    ModelRequest,
    OutputSchema,
    ReActLoop,
    RedactedThinking,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    ask_structured,
    tool,
)

# -- import and construction -----------------------------------------------------------


def test_import_agentloops_does_not_import_the_sdk() -> None:
    code = (
        "import sys, agentloops, agentloops.providers.anthropic\n"
        "assert 'anthropic' not in sys.modules, 'imported at package import'\n"
        "from agentloops import AnthropicModel\n"
        "assert 'anthropic' not in sys.modules, 'imported at class access'\n"
        "print(AnthropicModel.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "agentloops.providers.anthropic"


def test_anthropic_model_is_a_lazy_public_name() -> None:
    import agentloops

    assert "AnthropicModel" in agentloops.__all__
    assert agentloops.AnthropicModel is AnthropicModel
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        agentloops.Nope  # noqa: B018


def test_default_client_reads_the_api_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, messages_route: respx.Route
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    messages_route.mock(return_value=reply(text("hi")))
    response = AnthropicModel().complete(ModelRequest("", [Message.user("hello")]))
    assert response.message.text == "hi"
    assert messages_route.calls[0].request.headers["authorization"] == "Bearer env-key"
    assert bodies(messages_route)[0]["model"] == "claude-sonnet-5"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"thinking": "enabled"}, "thinking must be"),
        ({"thinking": {"budget_tokens": 2048}}, "thinking must be"),
    ],
)
def test_bad_configuration_is_rejected_at_construction(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        make_model(**kwargs)


# -- the transcript on the wire ----------------------------------------------------------


def test_thinking_and_redacted_thinking_are_echoed_byte_for_byte(
    messages_route: respx.Route,
) -> None:
    log: list[str] = []
    first = [THINKING, REDACTED, text(" \n "), tool_use("toolu_1", query="paris")]
    messages_route.side_effect = [
        reply(*first, stop_reason="tool_use"),
        reply(text("Paris has 2.1M people.")),
    ]
    result = ReActLoop(make_model(), make_tools(log)).run("Population of Paris?")
    assert result.answer == "Paris has 2.1M people."
    assert log == ["paris"]
    assert result.messages[1].content == (
        Thinking(THINKING["thinking"], SIGNATURE),
        RedactedThinking(REDACTED["data"]),
        ToolCall("toolu_1", "lookup", {"query": "paris"}),
    )
    second = bodies(messages_route)[1]["messages"]
    # the whitespace-only text block is dropped (the API rejects it when echoed)
    assert second[1] == {"role": "assistant", "content": [THINKING, REDACTED, first[3]]}
    assert bodies(messages_route)[1]["thinking"] == {"type": "adaptive"}


def test_parallel_results_go_back_in_one_user_message_with_is_error(
    messages_route: respx.Route,
) -> None:
    log: list[str] = []
    calls = [
        tool_use("toolu_a", query="a"),
        tool_use("toolu_b", "explode", reason="boom"),
        tool_use("toolu_c", query="c"),
    ]
    messages_route.side_effect = [reply(*calls, stop_reason="tool_use"), reply(text("done"))]
    ReActLoop(make_model(), make_tools(log)).run("go")
    results = bodies(messages_route)[1]["messages"][2]
    assert results["role"] == "user"
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in results["content"]]
    assert [b["tool_use_id"] for b in blocks] == ["toolu_a", "toolu_b", "toolu_c"]
    assert blocks[0] == {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found a"}
    assert blocks[1]["is_error"] is True
    assert "RuntimeError" in blocks[1]["content"] and "boom" in blocks[1]["content"]
    assert "is_error" not in blocks[2]


def test_empty_tool_output_is_sent_without_content(messages_route: respx.Route) -> None:
    @tool
    def quiet() -> str:
        """Says nothing."""
        return ""

    messages_route.side_effect = [
        reply(tool_use("toolu_q", "quiet"), stop_reason="tool_use"),
        reply(text("ok")),
    ]
    ReActLoop(make_model(cache=False), [quiet]).run("go")
    sent = bodies(messages_route)[1]["messages"][2]["content"]
    assert all(b.get("content") != "" for b in sent)
    assert sent[0]["tool_use_id"] == "toolu_q"


def test_cache_breakpoints_on_system_tools_and_the_newest_message_only(
    messages_route: respx.Route,
) -> None:
    log: list[str] = []
    messages_route.side_effect = [
        reply(tool_use("toolu_1", query="a"), stop_reason="tool_use"),
        reply(tool_use("toolu_2", query="b"), stop_reason="tool_use"),
        reply(text("done")),
    ]
    ReActLoop(make_model(), make_tools(log), system="You are terse.").run("go")
    sent = bodies(messages_route)
    for body in sent:
        assert body["system"] == [
            {"type": "text", "text": "You are terse.", **{"cache_control": EPHEMERAL}}
        ]
        assert "cache_control" not in body["tools"][0]
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
        assert body["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
        assert breakpoints(body["messages"]) == 1
        assert breakpoints(body) == 3
    assert len(sent[2]["messages"]) == 5


def test_cache_false_sets_no_breakpoints(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        reply(tool_use("toolu_1", query="a"), stop_reason="tool_use"),
        reply(text("done")),
    ]
    ReActLoop(make_model(cache=False), make_tools([]), system="sys").run("go")
    assert [breakpoints(b) for b in bodies(messages_route)] == [0, 0]


def expected_wire(messages: list[Message]) -> list[dict[str, Any]]:
    """The wire form the test expects, written out independently of the library."""
    wire = []
    for m in messages:
        blocks = []
        for b in m.content:
            if isinstance(b, Text):
                blocks.append(text(b.text))
            elif isinstance(b, ToolCall):
                blocks.append(tool_use(b.id, b.name, **b.args))
            elif isinstance(b, ToolResult):
                result = {"type": "tool_result", "tool_use_id": b.call_id, "content": b.content}
                blocks.append({**result, "is_error": True} if b.is_error else result)
            elif isinstance(b, Thinking):
                blocks.append({"type": "thinking", "thinking": b.text, "signature": b.signature})
        wire.append({"role": m.role, "content": blocks})
    return wire


def test_every_request_of_a_long_run_carries_the_whole_transcript(
    messages_route: respx.Route,
) -> None:
    turns = [
        reply(THINKING, tool_use(f"toolu_{i}", query=str(i)), stop_reason="tool_use")
        for i in range(5)
    ]
    messages_route.side_effect = [*turns, reply(text("done"))]
    result = ReActLoop(make_model(cache=False), make_tools([])).run("go")
    sent = bodies(messages_route)
    assert len(sent) == 6
    for i, body in enumerate(sent):
        assert body["messages"] == expected_wire(result.messages[: 2 * i + 1])


def test_a_replaced_list_or_last_message_is_converted_afresh(messages_route: respx.Route) -> None:
    messages_route.side_effect = [reply(text("one")), reply(text("two")), reply(text("three"))]
    model = make_model(cache=False)
    live = [Message.user("first question")]
    model.complete(ModelRequest("", live))
    other = [Message.user("another question")]  # same length, different list
    model.complete(ModelRequest("", other))
    live[-1] = Message.user("edited question")  # the same list, its last turn replaced
    model.complete(ModelRequest("", live))
    assert [b["messages"] for b in bodies(messages_route)] == [
        [{"role": "user", "content": [text("first question")]}],
        [{"role": "user", "content": [text("another question")]}],
        [{"role": "user", "content": [text("edited question")]}],
    ]


def test_answer_at_limit_sends_the_rewritten_last_turn(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        reply(tool_use("toolu_1", query="a"), stop_reason="tool_use"),
        reply(text("best guess")),
    ]
    loop = ReActLoop(make_model(), make_tools([]), max_steps=1, answer_at_limit=True)
    result = loop.run("go")
    assert result.answer == "best guess"
    last = bodies(messages_route)[1]["messages"][-1]["content"]
    assert last[0]["type"] == "tool_result"
    assert last[-1]["text"].startswith("The step limit is reached")
    assert last[-1]["cache_control"] == EPHEMERAL
    assert bodies(messages_route)[1]["tool_choice"] == {"type": "none"}


def test_empty_and_server_tool_blocks_are_left_out(messages_route: respx.Route) -> None:
    server_use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    messages_route.side_effect = [reply(server_use, text("answer")), reply()]
    model = make_model(cache=False)
    live = [Message.user("q")]
    first = model.complete(ModelRequest("", live))
    assert first.message.content == (Text("answer"),)
    empty = model.complete(ModelRequest("", [*live, first.message, Message.user("more")]))
    assert empty.message.content == ()
    follow_up = [*live, first.message, Message.user("more"), empty.message, Message.user("again")]
    messages_route.side_effect = [reply(text("fine"))]
    model.complete(ModelRequest("", follow_up))
    # the empty assistant turn is left out; the API merges the two user turns around it
    assert [m["role"] for m in bodies(messages_route)[-1]["messages"]] == [
        "user",
        "assistant",
        "user",
        "user",
    ]


# -- request parameters ------------------------------------------------------------------


SPECS = [ToolSpec("lookup", "Look a query up.", {"type": "object", "properties": {}})]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("any", {"type": "any"}),
        ("none", {"type": "none"}),
        ("lookup", {"type": "tool", "name": "lookup"}),
    ],
)
def test_tool_choice_mapping(
    messages_route: respx.Route, choice: str, wire: dict[str, Any]
) -> None:
    messages_route.mock(return_value=reply(text("ok")))
    make_model().complete(ModelRequest("", [Message.user("q")], tools=SPECS, tool_choice=choice))
    assert bodies(messages_route)[0]["tool_choice"] == wire


@pytest.mark.parametrize(
    ("thinking", "choice", "tools", "match"),
    [
        ({"type": "enabled", "budget_tokens": 2048}, "any", SPECS, "manual thinking"),
        ({"type": "enabled", "budget_tokens": 2048}, "lookup", SPECS, "manual thinking"),
        ("adaptive", "search", SPECS, "names no offered tool"),
        ("adaptive", "any", [], "no tools were offered"),
    ],
)
def test_requests_the_api_would_reject_fail_before_any_http_call(
    thinking: Any, choice: str, tools: list[ToolSpec], match: str
) -> None:
    model = make_model(thinking=thinking)
    with respx.mock(using="httpcore2", base_url=ANTHROPIC_API, assert_all_called=False) as api:
        route = api.post("/v1/messages").mock(return_value=reply(text("no")))
        with pytest.raises(ConfigurationError, match=match):
            model.complete(ModelRequest("", [Message.user("q")], tools=tools, tool_choice=choice))
    assert route.call_count == 0


def test_manual_thinking_with_auto_tool_choice_is_sent(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=reply(text("ok")))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    make_model(thinking=thinking).complete(ModelRequest("", [Message.user("q")], tools=SPECS))
    assert bodies(messages_route)[0]["thinking"] == thinking


def test_max_tokens_comes_from_the_request_or_the_model(messages_route: respx.Route) -> None:
    messages_route.side_effect = [reply(text("a")), reply(text("b"))]
    model = make_model(max_tokens=1000, thinking=None)
    model.complete(ModelRequest("", [Message.user("q")]))
    model.complete(ModelRequest("", [Message.user("q")], max_tokens=77))
    sent = bodies(messages_route)
    assert [b["max_tokens"] for b in sent] == [1000, 77]
    assert "thinking" not in sent[0] and "system" not in sent[0] and "tools" not in sent[0]
    assert "stream" not in sent[0]


# -- responses ---------------------------------------------------------------------------


def test_usage_is_mapped_and_summed_over_a_run(messages_route: respx.Route) -> None:
    usage = {
        "input_tokens": 12,
        "output_tokens": 7,
        "cache_read_input_tokens": 300,
        "cache_creation_input_tokens": 40,
    }
    messages_route.side_effect = [
        reply(tool_use("toolu_1", query="a"), stop_reason="tool_use", usage=usage),
        reply(text("done"), usage={"input_tokens": 3, "output_tokens": 2}),
    ]
    result = ReActLoop(make_model(), make_tools([])).run("go")
    assert result.usage == Usage(
        input_tokens=15, output_tokens=9, cache_read_tokens=300, cache_write_tokens=40
    )
    assert result.usage.total_input_tokens == 355


@pytest.mark.parametrize(
    ("wire", "ours"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "context_window"),
    ],
)
def test_stop_reasons_are_normalised(messages_route: respx.Route, wire: str, ours: str) -> None:
    messages_route.mock(return_value=reply(text("x"), stop_reason=wire))
    response = make_model().complete(ModelRequest("", [Message.user("q")]))
    assert response.stop_reason == ours
    assert response.model == "claude-sonnet-5"


def test_an_unknown_stop_reason_is_a_model_error(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=reply(text("x"), stop_reason="compaction", request_id="req_9"))
    with pytest.raises(ModelError, match="unknown stop_reason 'compaction'") as info:
        make_model().complete(ModelRequest("", [Message.user("q")]))
    assert info.value.request_id == "req_9"


def test_refusal_ends_the_run_as_refused(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=reply(text("I can't help with that."), stop_reason="refusal"))
    result = ReActLoop(make_model(), make_tools([])).run("something bad")
    assert result.stop_reason == "refused"


def test_a_tool_call_cut_by_max_tokens_is_never_run(messages_route: respx.Route) -> None:
    log: list[str] = []
    cut = reply(text("Let me check."), tool_use("toolu_cut", query="par"), stop_reason="max_tokens")
    messages_route.side_effect = [cut, reply(text("Paris."))]
    result = ReActLoop(make_model(), make_tools(log)).run("go")
    assert log == []
    assert result.tool_calls == 0
    answered = bodies(messages_route)[1]["messages"][2]["content"][0]
    assert answered["tool_use_id"] == "toolu_cut" and answered["is_error"] is True


def test_pause_turn_is_continued_and_merged(messages_route: respx.Route) -> None:
    server_use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    messages_route.side_effect = [
        reply(THINKING, text("Searching."), server_use, stop_reason="pause_turn"),
        reply(text("Found it."), usage={"input_tokens": 4, "output_tokens": 3}),
    ]
    response = make_model().complete(ModelRequest("", [Message.user("q")]))
    assert response.stop_reason == "end_turn"
    assert response.message.content == (
        Thinking(THINKING["thinking"], SIGNATURE),
        Text("Searching."),
        Text("Found it."),
    )
    assert response.usage == Usage(input_tokens=14, output_tokens=8)
    continued = bodies(messages_route)[1]["messages"]
    assert continued[-1] == {
        "role": "assistant",
        "content": [THINKING, text("Searching."), server_use],
    }
    assert breakpoints(continued) == 1 and "cache_control" in continued[0]["content"][-1]


def test_pause_turn_continuations_are_bounded(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        reply(text(f"part {i}"), stop_reason="pause_turn") for i in range(6)
    ]
    response = make_model().complete(ModelRequest("", [Message.user("q")]))
    assert messages_route.call_count == 6
    assert response.stop_reason == "pause_turn"  # handed to the loop, which sends it back
    assert len(response.message.content) == 6


# -- structured output -------------------------------------------------------------------


class City(pydantic.BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("thinking", ["adaptive", None])
def test_structured_output_uses_the_native_json_schema_format(
    messages_route: respx.Route, thinking: str | None
) -> None:
    messages_route.mock(return_value=reply(text('{"name": "Paris", "population": 2100000}')))
    reply_ = ask_structured(make_model(thinking=thinking), City, "Biggest French city?")
    assert reply_.value == City(name="Paris", population=2100000)
    body = bodies(messages_route)[0]
    schema = body["output_config"]["format"]["schema"]
    assert body["output_config"]["format"]["type"] == "json_schema"
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"name", "population"}
    assert ("thinking" in body) == (thinking is not None)
    assert "tool_choice" not in body and "tools" not in body


def test_structured_output_that_is_not_json_is_retried(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        reply(text("Paris, about 2.1 million")),
        reply(text('{"name": "Paris", "population": 2100000}')),
    ]
    value = ask_structured(make_model(), City, "Biggest French city?").value
    assert value.population == 2100000
    retry = bodies(messages_route)[1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]


def test_structured_output_is_none_on_refusal(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=reply(text("{}"), stop_reason="refusal"))
    request = ModelRequest("", [Message.user("q")], output=OutputSchema("City", {"type": "object"}))
    assert make_model().complete(request).output is None


# -- failures and retries ----------------------------------------------------------------


def test_529_is_retried_by_the_retry_policy_then_succeeds(messages_route: respx.Route) -> None:
    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded"), reply(text("ok"))]
    response = make_model().complete(ModelRequest("", [Message.user("q")]))
    assert response.message.text == "ok"
    assert messages_route.call_count == 2
    # agentloops retries (RetryPolicy), with the SDK's own retries off: each try is a first
    assert [c.request.headers["x-stainless-retry-count"] for c in messages_route.calls] == [
        "0",
        "0",
    ]


def test_400_is_not_retried_and_becomes_model_error(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=error(400, "invalid_request_error", "bad thing", "req_400"))
    with pytest.raises(ModelError, match="400") as info:
        ReActLoop(make_model(), make_tools([])).run("go")
    err = info.value
    assert messages_route.call_count == 1
    assert (err.status, err.request_id) == (400, "req_400")
    assert isinstance(err.__cause__, anthropic.BadRequestError)
    assert "bad thing" in str(err)
    assert err.result is not None and err.result.stop_reason == "error"  # the loop's partial run


def test_retries_exhausted_become_model_error(messages_route: respx.Route) -> None:
    messages_route.side_effect = [error(529, "overloaded_error", "Overloaded")] * 3
    with pytest.raises(ModelError) as info:
        make_model(max_retries=2).complete(ModelRequest("", [Message.user("q")]))
    assert messages_route.call_count == 3  # the policy's tries, nothing stacked on top
    assert (info.value.status, info.value.kind) == (529, "overloaded")
    assert isinstance(info.value.__cause__, anthropic.OverloadedError)


def test_connection_error_becomes_model_error(messages_route: respx.Route) -> None:
    messages_route.side_effect = httpx.ConnectError("refused")
    with pytest.raises(ModelError, match="APIConnectionError") as info:
        make_model(max_retries=0).complete(ModelRequest("", [Message.user("q")]))
    assert info.value.status is None
    assert isinstance(info.value.__cause__, anthropic.APIConnectionError)


def test_the_api_key_never_appears_in_an_error(messages_route: respx.Route) -> None:
    secret = "sk-ant-CANARY-0123456789"
    messages_route.mock(return_value=error(401, "authentication_error", "invalid x-api-key"))
    model = AnthropicModel(client=anthropic.Anthropic(api_key=secret, max_retries=0))
    with pytest.raises(ModelError) as info:
        model.complete(ModelRequest("", [Message.user("q")]))
    assert info.value.status == 401
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert secret not in repr(model)


# -- streaming for large max_tokens ------------------------------------------------------


def stream_start() -> dict[str, Any]:
    message = {
        "id": "msg_s",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 1},
    }
    return {"type": "message_start", "message": message}


def stream_end(stop_reason: str, output_tokens: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def stream_events() -> list[dict[str, Any]]:
    thinking_start = {"type": "thinking", "thinking": "", "signature": ""}
    delta = "content_block_delta"
    return [
        stream_start(),
        {"type": "content_block_start", "index": 0, "content_block": thinking_start},
        {"type": delta, "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
        {"type": delta, "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_s", "name": "lookup", "input": {}},
        },
        {
            "type": delta,
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": '},
        },
        {
            "type": delta,
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"rome"}'},
        },
        {"type": "content_block_stop", "index": 1},
        *stream_end("tool_use", 42),
    ]


def test_large_max_tokens_streams_under_the_hood(messages_route: respx.Route) -> None:
    messages_route.side_effect = [sse(*stream_events()), streamed_text("Rome.")]
    log: list[str] = []
    result = ReActLoop(make_model(max_tokens=64000), make_tools(log)).run("go")
    first, second = bodies(messages_route)
    assert first["stream"] is True and first["max_tokens"] == 64000
    assert second["stream"] is True
    assert result.answer == "Rome."
    assert log == ["rome"]
    assert result.messages[1].content == (
        Thinking("Hmm.", "sig=="),
        ToolCall("toolu_s", "lookup", {"query": "rome"}),
    )
    assert second["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Hmm.",
        "signature": "sig==",
    }
    assert result.usage.output_tokens == 42 + 5


@pytest.mark.parametrize(
    ("model", "max_tokens", "streams"),
    [
        ("claude-sonnet-5", 21_333, False),
        ("claude-sonnet-5", 21_334, True),
        ("claude-opus-4-0", 8_192, False),  # the SDK's per-model non-streaming limit
        ("claude-opus-4-0", 8_193, True),
    ],
)
def test_streaming_starts_exactly_above_the_sdk_limit(
    messages_route: respx.Route, model: str, max_tokens: int, streams: bool
) -> None:
    messages_route.mock(return_value=streamed_text("ok") if streams else reply(text("ok")))
    request = ModelRequest("", [Message.user("q")], max_tokens=max_tokens)
    assert make_model(model=model).complete(request).message.text == "ok"
    assert bodies(messages_route)[0].get("stream", False) is streams


def test_stream_error_event_becomes_model_error(messages_route: respx.Route) -> None:
    events = stream_events()[:1]
    failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    messages_route.mock(return_value=sse(*events, failure))
    with pytest.raises(ModelError, match="Overloaded"):
        make_model(max_tokens=30000).complete(ModelRequest("", [Message.user("q")]))


# -- one model shared by concurrent runs -----------------------------------------------


def test_concurrent_runs_on_one_model_keep_their_own_transcripts(
    messages_route: respx.Route,
) -> None:
    """Each thread has its own conversion cache, so interleaved runs never mix."""
    lock = threading.Lock()
    turns: dict[str, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        task = body["messages"][0]["content"][0]["text"]
        with lock:
            turns[task] = n = turns.get(task, 0) + 1
        assert body["messages"] == expected_wire_for(task, n)
        if n < 4:
            return reply(tool_use(f"toolu_{task}_{n}", query=f"{task}.{n}"), stop_reason="tool_use")
        return reply(text(f"done {task}"))

    messages_route.side_effect = answer
    loop = ReActLoop(make_model(cache=False), make_tools([]))
    tasks = [f"task{i}" for i in range(6)]
    with ThreadPoolExecutor(3) as pool:
        answers = [r.answer for r in pool.map(loop.run, tasks)]
    assert answers == [f"done {t}" for t in tasks]
    assert messages_route.call_count == 24


def expected_wire_for(task: str, turn: int) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "user", "content": [text(task)]}]
    for n in range(1, turn):
        call_id = f"toolu_{task}_{n}"
        wire.append({"role": "assistant", "content": [tool_use(call_id, query=f"{task}.{n}")]})
        result = {"type": "tool_result", "tool_use_id": call_id, "content": f"found {task}.{n}"}
        wire.append({"role": "user", "content": [result]})
    return wire
