import asyncio
import json
import threading

import pytest

from agentloops import (
    ConfigurationError,
    Message,
    ModelRequest,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    TranscriptError,
)
from agentloops.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptExhausted,
    respond,
    respond_structured,
    use_tools,
)


def _req(*messages):
    return ModelRequest("", list(messages))


def test_script_items_of_every_kind():
    boom = RuntimeError("provider down")
    model = ScriptedModel(["plain", respond("built"), boom, lambda r: f"saw {len(r.messages)}"])
    q = _req(Message.user("q"))
    assert model.complete(q).message.text == "plain"
    assert model.complete(q).message.text == "built"
    with pytest.raises(RuntimeError, match="provider down"):
        model.complete(q)
    assert model.complete(q).message.text == "saw 1"
    assert model.calls == 4 and model.remaining == 0
    model.assert_complete()


def test_running_out_is_a_clear_error_and_assert_complete_catches_leftovers():
    model = ScriptedModel(["a", "b"])
    q = _req(Message.user("q"))
    model.complete(q)
    with pytest.raises(AssertionError, match="1 of 2 scripted responses were never used"):
        model.assert_complete()
    model.complete(q)
    with pytest.raises(ScriptExhausted, match="call 3 was not expected"):
        model.complete(q)


def test_requests_are_recorded_as_snapshots():
    model = ScriptedModel(["a", "b"])
    messages = [Message.user("q")]
    model.complete(_req(*messages))
    assert len(model.requests[0].messages) == 1
    live = [Message.user("q"), Message.assistant("a"), Message.user("again")]
    request = ModelRequest("", live)
    model.complete(request)
    live.append(Message.assistant("b"))
    assert len(model.requests[1].messages) == 3


def test_builders():
    turn = use_tools(("add", {"a": 1}), ToolCall("fixed", "f", {}), text="let me")
    assert turn.stop_reason == "tool_use"
    ids = [c.id for c in turn.message.tool_calls]
    assert ids[1] == "fixed" and ids[0].startswith("toolu_")
    assert turn.message.text == "let me"
    again = use_tools(("add", {"a": 1}))
    assert again.message.tool_calls[0].id != ids[0]
    structured = respond_structured({"k": 1})
    assert structured.output == {"k": 1} and structured.message.text == '{"k": 1}'


def test_every_request_is_validated():
    model = FunctionModel(lambda r: "x")
    with pytest.raises(TranscriptError):
        model.complete(_req(Message.user("q"), Message("assistant", (ToolCall("1", "f", {}),))))
    unchecked = FunctionModel(lambda r: "x", validate=False)
    unchecked.complete(_req(Message.assistant("no user turn")))


def test_altered_or_dropped_thinking_is_caught():
    thinking = Thinking("I should add", "sig-1")
    model = ScriptedModel([use_tools(("add", {}), thinking=thinking), "done", "done"])
    q = Message.user("q")
    turn = model.complete(_req(q)).message
    results = Message("user", tuple(ToolResult(c.id, "1") for c in turn.tool_calls))
    # echoed unchanged: fine
    model.complete(_req(q, turn, results))
    # thinking dropped: rejected
    dropped = Message("assistant", tuple(b for b in turn.content if not isinstance(b, Thinking)))
    with pytest.raises(TranscriptError, match="altered"):
        model.complete(_req(q, dropped, results))


def test_altered_thinking_text_is_caught_by_signature():
    model = ScriptedModel([respond("a", thinking=Thinking("plan", "sig-9")), "b"])
    q = Message.user("q")
    model.complete(_req(q))
    forged = Message("assistant", (Thinking("edited plan", "sig-9"), Text("a")))
    with pytest.raises(TranscriptError, match="altered"):
        model.complete(_req(q, forged, Message.user("next")))


def test_thread_safe_script_consumption():
    model = ScriptedModel([str(i) for i in range(200)])
    seen = []

    def worker():
        for _ in range(50):
            seen.append(model.complete(_req(Message.user("q"))).message.text)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen, key=int) == [str(i) for i in range(200)]
    model.assert_complete()


def test_altered_redacted_thinking_is_caught():
    from agentloops import RedactedThinking

    model = ScriptedModel([use_tools(("f", {}), thinking=RedactedThinking("blob")), "done"])
    q = Message.user("q")
    turn = model.complete(_req(q)).message
    results = Message("user", tuple(ToolResult(c.id, "1") for c in turn.tool_calls))
    forged = Message("assistant", (RedactedThinking("other"), *turn.tool_calls))
    with pytest.raises(TranscriptError, match="altered"):
        model.complete(_req(q, forged, results))


def test_respond_structured_dumps_a_pydantic_model():
    import pydantic

    class Route(pydantic.BaseModel):
        route: str

    assert respond_structured(Route(route="a")).output == {"route": "a"}


def test_script_items_are_checked_when_the_model_is_built():
    with pytest.raises(ConfigurationError, match=r"item 1 is a dict.*respond_structured"):
        ScriptedModel(["fine", {"steps": []}])
    with pytest.raises(ConfigurationError, match="item 0 is a int"):
        ScriptedModel([42])


def test_running_out_says_which_call_and_what_it_asked():
    model = ScriptedModel(["only"])
    model.complete(ModelRequest("You are the planner.\nMore rules.", [Message.user("q")]))
    with pytest.raises(ScriptExhausted) as info:
        model.complete(ModelRequest("You are the solver.", [Message.user("what is 2 + 2?")]))
    text = str(info.value)
    assert "call 2 was not expected" in text
    assert "'what is 2 + 2?'" in text and "'You are the solver.'" in text


def test_an_async_function_model_under_complete_and_acomplete():
    async def brain(request):
        return f"async saw {request.messages[-1].text}"

    model = FunctionModel(brain)
    assert model.complete(_req(Message.user("a"))).message.text == "async saw a"
    response = asyncio.run(model.acomplete(_req(Message.user("b"))))
    assert response.message.text == "async saw b" and model.calls == 2


def test_streams_hand_out_the_reply_in_chunks_then_the_response():
    reply = use_tools(
        ToolCall("c1", "lookup", {"key": "alpha"}),
        text="Looking it up",
        thinking=Thinking("hmm, alpha", "sig"),
    )
    model = ScriptedModel([reply], chunk=5)
    *parts, final = model.stream(_req(Message.user("q")))
    assert final == reply
    texts = [p.text for p in parts if isinstance(p, TextDelta)]
    assert texts == ["Looki", "ng it", " up"]
    assert "".join(p.text for p in parts if isinstance(p, ThinkingDelta)) == "hmm, alpha"
    calls = [p for p in parts if isinstance(p, ToolCallDelta)]
    assert (calls[0].call_id, calls[0].name, calls[0].arguments) == ("c1", "lookup", "")
    assert json.loads("".join(p.arguments for p in calls)) == {"key": "alpha"}

    async def collect():
        return [p async for p in ScriptedModel([reply], chunk=5).astream(_req(Message.user("q")))]

    def plain(items):  # events differ in their timestamps only
        return [
            (type(i).__name__, getattr(i, "text", ""), getattr(i, "arguments", "")) for i in items
        ]

    assert plain(asyncio.run(collect())) == plain([*parts, final])


def test_streaming_still_validates_every_request():
    model = ScriptedModel(["x"])
    bad = _req(Message.user("q"), Message.user("again"))
    with pytest.raises(TranscriptError):
        list(model.stream(bad))


def test_chunk_must_be_positive():
    with pytest.raises(ConfigurationError, match="chunk must be >= 1"):
        FunctionModel(lambda r: "x", chunk=0)


_PHASE = """
import sys
from agentloops import ReActLoop, SQLiteStore, tool
from agentloops.testing import ScriptedModel, use_tools

@tool
def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b

store = SQLiteStore(sys.argv[1])
if sys.argv[2] == "first":  # one tool turn, then the process stops (the model fails)
    model = ScriptedModel([use_tools(("add", {"a": 1, "b": 2})), RuntimeError("killed")])
    try:
        ReActLoop(model, [add], store=store).run("q", run_id="r1")
    except RuntimeError:
        pass
else:  # a fresh process and a fresh fake resume it: one more tool turn, then the answer
    model = ScriptedModel([use_tools(("add", {"a": 3, "b": 4})), "7"])
    print(ReActLoop(model, [add], store=store).resume("r1").answer)
"""


def test_a_durable_run_resumed_in_a_new_process_with_a_fresh_fake_gets_new_call_ids(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "runs.db")
    for phase in ("first", "second"):
        done = subprocess.run(
            [sys.executable, "-c", _PHASE, path, phase], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "7"  # not the fake's own "an assistant turn was altered"


def test_use_tools_ids_differ_between_processes():
    import subprocess
    import sys

    code = (
        "from agentloops.testing import use_tools\n"
        "print(use_tools(('a', {})).message.tool_calls[0].id)"
    )
    ids = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        for _ in "ab"
    }
    assert len(ids) == 2
