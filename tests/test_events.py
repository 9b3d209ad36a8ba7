import json
import threading

from agentloops import (
    JSONLSink,
    ModelCallFinished,
    PlanMade,
    ToolCallFinished,
    ToolOutcome,
    Usage,
    event_to_dict,
    tool,
)
from agentloops.testing import ScriptedModel, use_tools


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def test_event_to_dict_is_json_ready():
    event = ToolCallFinished(
        loop="react", run_id="r", call_id="c", name="echo", outcome=ToolOutcome(content="x")
    )
    data = event_to_dict(event)
    assert data["event"] == "ToolCallFinished"
    assert data["outcome"] == {"content": "x", "is_error": False, "seconds": 0.0}
    finished = ModelCallFinished(
        loop="react",
        run_id="r",
        step=0,
        stop_reason="end_turn",
        usage=Usage(output_tokens=3),
        model="m",
        seconds=0.1,
    )
    assert event_to_dict(finished)["usage"]["output_tokens"] == 3
    json.dumps(data)


def test_pydantic_and_nested_values_are_dumped():
    import pydantic

    class P(pydantic.BaseModel):
        steps: list[int]

    data = event_to_dict(PlanMade(loop="x", run_id="r", plan=P(steps=[1, 2])))
    assert data["plan"] == {"steps": [1, 2]}


def test_jsonl_sink_writes_one_line_per_event(tmp_path, ReActLoop):
    path = tmp_path / "events.jsonl"
    with JSONLSink(path) as sink:
        model = ScriptedModel([use_tools(("echo", {"text": "hi"})), "done"])
        ReActLoop(model, [echo], on_event=sink).run("q")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [line["event"] for line in lines]
    assert kinds == [
        "RunStarted",
        "ModelCallStarted",
        "ModelCallFinished",
        "ToolCallStarted",
        "ToolCallFinished",
        "ModelCallStarted",
        "ModelCallFinished",
        "RunFinished",
    ]
    assert lines[3]["args"] == {"text": "hi"}


def test_jsonl_sink_is_thread_safe(tmp_path):
    path = tmp_path / "e.jsonl"
    sink = JSONLSink(path)
    event = PlanMade(loop="x", run_id="r", plan={"a": "b" * 1000})

    def write():
        for _ in range(100):
            sink(event)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sink.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(line)["plan"]["a"] for line in lines)


def test_tool_calls_and_lists_in_events_are_dumped():
    from agentloops import ApprovalRequested, Replanned, ToolCall

    asked = event_to_dict(
        ApprovalRequested(loop="react", run_id="r", calls=[ToolCall("c1", "send", {"to": "a"})])
    )
    assert asked["calls"] == [
        {"type": "tool_call", "id": "c1", "name": "send", "args": {"to": "a"}}
    ]
    replanned = event_to_dict(Replanned(loop="rewoo", run_id="r", attempt=1, problems=["x", "y"]))
    assert replanned["problems"] == ["x", "y"]
