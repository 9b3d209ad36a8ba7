"""AnthropicModel when things go wrong: replies of the wrong shape (plain and streamed),
stalled streams, an API key echoed by the server, a missing SDK and missing credentials.

Every failure must be a typed error naming what was wrong, never an AttributeError,
TypeError or ValueError from inside the provider, and never carry the API key.
"""

from __future__ import annotations

import copy
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import anthropic
import httpcore2
import httpx
import pytest
import respx
from _anthropic_helpers import (
    Body,
    as_events,
    body_response,
    encode,
    error,
    make_model,
    make_tools,
    reply_body,
    sse,
    text,
    tool_use,
)

from agentloops import (
    AnthropicModel,
    ConfigurationError,
    Message,
    ModelError,
    ModelRequest,
    ReActLoop,
)

pytestmark = pytest.mark.anyio
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def ask() -> ModelRequest:
    return ModelRequest("", [Message.user("q")])


async def complete(model: AnthropicModel, mode: str) -> Any:
    if mode == "sync":
        return model.complete(ask())
    return await model.acomplete(ask())


async def stream(model: AnthropicModel, mode: str) -> list[Any]:
    if mode == "sync":
        return list(model.stream(ask()))
    return [item async for item in model.astream(ask())]


# -- plain replies of the wrong shape ----------------------------------------------------


def broken(change: Any) -> dict[str, Any]:
    body = reply_body(text("hi"), tool_use("toolu_1", query="x"), stop_reason="tool_use")
    change(body)
    return body


BAD_REPLIES = [
    pytest.param(
        broken(lambda b: b.update(content="hi")), "content: Input should be a valid array"
    ),
    pytest.param(
        broken(lambda b: b["content"][1].update(input="x")),
        "content.1.tool_use.input: Input should be an object",
    ),
    pytest.param(
        broken(lambda b: b["usage"].update(input_tokens="many")),
        "usage.input_tokens: Input should be a valid integer",
    ),
    pytest.param(
        broken(lambda b: b["usage"].update(output_tokens=-3)),
        "usage.output_tokens: Input should be greater than or equal to 0",
    ),
    pytest.param(
        broken(lambda b: b["content"][0].update(text=None)),
        "content.0.text.text: Input should be a valid string",
    ),
    pytest.param(broken(lambda b: b.pop("stop_reason")), "stop_reason: Field required"),
    pytest.param(broken(lambda b: b.pop("usage")), "usage: Field required"),
    pytest.param(broken(lambda b: b["content"].append(7)), "content.2.other: Input should be"),
    pytest.param(broken(lambda b: b["content"][1].pop("id")), "content.1.tool_use.id: Field"),
    pytest.param(["not", "a", "message"], "(reply): Input should be"),
]


@MODES
@pytest.mark.parametrize(("body", "problem"), BAD_REPLIES)
async def test_a_reply_of_the_wrong_shape_is_a_model_error_naming_the_field(
    messages_route: respx.Route, mode: str, body: Any, problem: str
) -> None:
    messages_route.mock(return_value=httpx.Response(200, json=body, headers={"request-id": "r7"}))
    with pytest.raises(ModelError, match="cannot read") as info:
        await complete(make_model(), mode)
    assert problem in str(info.value)
    assert info.value.request_id == "r7"


@MODES
async def test_a_reply_that_is_not_json_is_a_model_error(
    messages_route: respx.Route, mode: str
) -> None:
    page = b"<html><body>502 Bad Gateway</body></html>"
    messages_route.mock(return_value=httpx.Response(200, content=page))
    with pytest.raises(ModelError, match="Invalid JSON") as info:
        await complete(make_model(), mode)
    assert "<html><body>502" in str(info.value)


@MODES
async def test_problems_are_quoted_up_to_a_limit(messages_route: respx.Route, mode: str) -> None:
    body = reply_body(*[{"type": "text", "text": None}] * 9)
    messages_route.mock(return_value=httpx.Response(200, json=body))
    with pytest.raises(ModelError, match="and 4 more"):
        await complete(make_model(), mode)


def test_a_bad_reply_in_a_loop_carries_the_partial_run(messages_route: respx.Route) -> None:
    messages_route.side_effect = [
        httpx.Response(
            200, json=reply_body(tool_use("toolu_1", query="a"), stop_reason="tool_use")
        ),
        httpx.Response(200, json={"type": "message", "content": None}),
    ]
    log: list[str] = []
    with pytest.raises(ModelError, match="content: Input should be a valid array") as info:
        ReActLoop(make_model(), make_tools(log)).run("go")
    assert log == ["a"]  # the first turn's tool ran and is kept
    result = info.value.result
    assert result.stop_reason == "error" and len(result.messages) == 3


# -- streams of the wrong shape ----------------------------------------------------------


def events() -> list[dict[str, Any]]:
    body = reply_body(text("hi"), tool_use("toolu_1", query="x"), stop_reason="tool_use")
    return as_events(body, size=4)


def edited(change: Any) -> list[dict[str, Any]]:
    stream_events = copy.deepcopy(events())
    change(stream_events)
    return stream_events


def json_of(arguments: str) -> list[dict[str, Any]]:
    """A complete stream whose tool call's arguments join to `arguments`."""
    kept = [
        e
        for e in events()
        if not (e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta")
    ]
    at = next(i for i, e in enumerate(kept) if e == {"type": "content_block_stop", "index": 1})
    delta = {"type": "input_json_delta", "partial_json": arguments}
    kept.insert(at, {"type": "content_block_delta", "index": 1, "delta": delta})
    return kept


BAD_STREAMS = [
    pytest.param(
        edited(lambda e: e[0]["message"].pop("usage")), "message.usage: Field required", id="start"
    ),
    pytest.param(
        edited(lambda e: e[2]["delta"].update(text=None)),
        "delta.text_delta.text: Input should be a valid string",
        id="text-null",
    ),
    pytest.param(
        edited(lambda e: e[-2]["usage"].update(output_tokens="five")),
        "usage.output_tokens: Input should be a valid integer",
        id="usage",
    ),
    pytest.param(
        edited(lambda e: e[2].update(index=9)), "block 9, which never started", id="index"
    ),
    pytest.param(edited(lambda e: e.insert(2, e[1])), "block 0 started twice", id="twice"),
    pytest.param(
        edited(lambda e: e[-4].update(delta={"type": "text_delta", "text": "x"})),
        "text_delta for content block 1, a tool_use block",
        id="kind",
    ),
    pytest.param(
        edited(lambda e: e.insert(0, e[1])),
        "content_block_start event before message_start",
        id="order",
    ),
    pytest.param(
        edited(lambda e: e[1]["content_block"].update(type=["text"])),
        "other.type: Input should be a valid string",
        id="block-type",
    ),
    pytest.param(
        edited(lambda e: next(x for x in e if x.get("index") == 1)["content_block"].pop("id")),
        "tool_use.id: Field required",
        id="call-id",
    ),
    pytest.param(json_of('{"query": "x"'), "are not JSON", id="arguments-cut"),
    pytest.param(
        json_of("[1, 2]"), "content.1.tool_use.input: Input should be a valid dictionary", id="list"
    ),
]


@MODES
@pytest.mark.parametrize(("stream_events", "problem"), BAD_STREAMS)
async def test_a_stream_of_the_wrong_shape_is_a_model_error_naming_the_problem(
    messages_route: respx.Route, mode: str, stream_events: list[dict[str, Any]], problem: str
) -> None:
    messages_route.mock(return_value=sse(*stream_events))
    with pytest.raises(ModelError, match="Anthropic API") as info:
        await stream(make_model(), mode)
    assert problem in str(info.value)
    assert info.value.request_id == "req_sse"


@MODES
@pytest.mark.parametrize(
    "data",
    [
        b"data: {not json\n\n",
        b"data: [1, 2]\n\n",
        b'data: {"no": "type"}\n\n',
        b"data: \xff\xfe\n\n",
    ],
)
async def test_an_unreadable_event_is_a_model_error(
    messages_route: respx.Route, mode: str, data: bytes
) -> None:
    payload = encode(events()[0]) + b"event: content_block_start\n" + data
    messages_route.mock(return_value=httpx.Response(200, content=payload))
    with pytest.raises(ModelError, match="Anthropic API stream"):
        await stream(make_model(), mode)


# -- stalls --------------------------------------------------------------------------------


@MODES
async def test_a_stalled_stream_is_a_model_error(messages_route: respx.Route, mode: str) -> None:
    """httpcore2 raises ReadTimeout when no byte arrives within the read timeout."""
    chunks = [encode(e) for e in events()[:3]]
    body = Body(chunks, then=httpcore2.ReadTimeout("timed out"))
    messages_route.mock(return_value=body_response(body))
    with pytest.raises(ModelError, match="stream stalled: ReadTimeout"):
        await stream(make_model(), mode)
    assert body.closed


@MODES
async def test_a_stalled_reply_body_is_a_model_error(
    messages_route: respx.Route, mode: str
) -> None:
    body = Body([b'{"id": "msg_1", "content": ['], then=httpcore2.ReadTimeout("timed out"))
    messages_route.mock(return_value=httpx.Response(200, stream=body))
    with pytest.raises(ModelError, match="Timeout"):
        await complete(make_model(max_retries=0), mode)


@MODES
async def test_a_connection_broken_mid_stream_is_a_model_error(
    messages_route: respx.Route, mode: str
) -> None:
    body = Body([encode(e) for e in events()[:3]], then=httpcore2.RemoteProtocolError("eof"))
    messages_route.mock(return_value=body_response(body))
    with pytest.raises(ModelError, match="stream broke: RemoteProtocolError"):
        await stream(make_model(), mode)


# -- the API key in an error -----------------------------------------------------------

SECRET = "sk-ant-CANARY-0123456789"


def keyed_model(kind: str) -> AnthropicModel:
    return AnthropicModel(client=anthropic.Anthropic(max_retries=0, **{kind: SECRET}))


def assert_scrubbed(exc: BaseException) -> None:
    printed = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    assert SECRET not in printed  # the message, and the SDK exception it wraps
    assert SECRET not in str(exc) and SECRET not in repr(exc)
    assert "[api key]" in str(exc)


@MODES
@pytest.mark.parametrize("kind", ["api_key", "auth_token"])
async def test_a_key_echoed_in_an_error_body_is_redacted(
    messages_route: respx.Route, mode: str, kind: str
) -> None:
    echoed = f"invalid x-api-key: {SECRET}"
    messages_route.mock(return_value=error(401, "authentication_error", echoed))
    model = keyed_model(kind)
    with pytest.raises(ModelError) as info:
        await complete(model, mode)
    assert info.value.status == 401
    assert_scrubbed(info.value)
    assert SECRET not in repr(model)


@MODES
async def test_a_key_echoed_in_a_stream_error_event_is_redacted(
    messages_route: respx.Route, mode: str
) -> None:
    failure = {"type": "error", "error": {"type": "api_error", "message": f"bad key {SECRET}"}}
    messages_route.mock(return_value=sse(events()[0], failure))
    with pytest.raises(ModelError) as info:
        await stream(keyed_model("api_key"), mode)
    assert_scrubbed(info.value)


def test_a_key_echoed_in_an_error_never_reaches_a_runs_detail(messages_route: respx.Route) -> None:
    messages_route.mock(return_value=error(403, "permission_error", f"key {SECRET} revoked"))
    with pytest.raises(ModelError) as info:
        ReActLoop(keyed_model("api_key"), make_tools([])).run("go")
    assert SECRET not in info.value.result.detail
    assert "[api key]" in info.value.result.detail


# -- missing SDK, missing credentials ------------------------------------------------------


def test_without_the_sdk_building_a_model_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # `import anthropic` now fails
    with pytest.raises(ConfigurationError, match=r"pip install 'agentloops-kit\[anthropic\]'"):
        AnthropicModel(api_key="sk-ant-0123456789")


@pytest.fixture
def no_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ANTHROPIC_* variable (conftest clears them) and no profile on disk."""
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.usefixtures("no_profile")
def test_no_credentials_anywhere_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="set ANTHROPIC_API_KEY"):
        AnthropicModel()


def test_an_unreadable_profile_fails_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))  # says: use a profile from here
    with pytest.raises(ConfigurationError, match="could not load credentials: Config file"):
        AnthropicModel()


@pytest.mark.usefixtures("no_profile")
@pytest.mark.parametrize(
    ("env", "kwargs", "header"),
    [
        ({"ANTHROPIC_API_KEY": "sk-ant-env-key"}, {}, "Bearer sk-ant-env-key"),
        ({"ANTHROPIC_AUTH_TOKEN": "oauth-token-1"}, {}, "Bearer oauth-token-1"),
        ({}, {"api_key": "sk-ant-arg-key"}, "Bearer sk-ant-arg-key"),
    ],
)
def test_credentials_from_the_environment_or_an_argument_are_used(
    monkeypatch: pytest.MonkeyPatch,
    messages_route: respx.Route,
    env: dict[str, str],
    kwargs: dict[str, str],
    header: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    messages_route.mock(return_value=httpx.Response(200, json=reply_body(text("ok"))))
    assert AnthropicModel(**kwargs).complete(ask()).message.text == "ok"
    assert messages_route.calls[0].request.headers["authorization"] == header


@pytest.mark.usefixtures("no_profile")
def test_a_client_given_is_trusted_with_its_own_credentials(messages_route: respx.Route) -> None:
    """A gateway may authenticate with a header of its own: no key check on a given client."""
    client = anthropic.Anthropic(default_headers={"X-Api-Key": "gateway-key"})
    messages_route.mock(return_value=httpx.Response(200, json=reply_body(text("ok"))))
    assert AnthropicModel(client=client).complete(ask()).message.text == "ok"
    assert json.loads(messages_route.calls[0].request.content)["model"] == "claude-sonnet-5"


def test_a_key_and_a_client_together_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        AnthropicModel(api_key="sk-ant-0123456789", client=anthropic.Anthropic(api_key="x"))
