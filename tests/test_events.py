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


def test_every_loop_name_an_event_carries_is_listed() -> None:
    """`events.LOOPS` names every `loop` an event may carry: the three loops, the router, the
    evaluator, and `ask_structured` / `ask_text` called on their own."""
    import pydantic

    from agentloops import (
        Evaluator,
        PlanAndExecute,
        ReActLoop,
        ReWOOPipeline,
        Router,
        ask_structured,
        ask_text,
    )
    from agentloops.events import LOOPS
    from agentloops.testing import FunctionModel, respond, respond_structured

    class Answer(pydantic.BaseModel):
        text: str

    def reply(request):
        schema = request.output.name if request.output is not None else ""
        if schema == "Answer":
            return respond_structured({"text": "yes"})
        if schema == "ReWOOPlan":
            steps = [{"step_id": "#E1", "description": "d", "tool_name": "echo",
                      "tool_args": {"text": "x"}}]  # fmt: skip
            return respond_structured({"steps": steps})
        if schema == "Plan":
            return respond_structured({"steps": [{"step_number": 1, "description": "d"}]})
        if schema == "RouteChoice":
            return respond_structured({"route": "a", "reasoning": "r"})
        if schema == "_Reply":
            return respond_structured({"verdict": "pass", "reasons": ["fine"]})
        return respond("done")

    seen: list[str] = []
    model = FunctionModel(reply)
    sink = lambda e: seen.append(e.loop)  # noqa: E731
    ask_structured(model, Answer, "q?", on_event=sink)
    ask_text(model, "q?", on_event=sink)
    ReActLoop(model, [echo], on_event=sink).run("q?")
    ReWOOPipeline(model, [echo], on_event=sink).run("q?")
    PlanAndExecute(model, [echo], on_event=sink).run("q?")
    Router(model, {"a": "route a"}, default="a", on_event=sink).route("q?")
    Evaluator(model, on_event=sink).evaluate("q?", "draft")
    assert set(seen) == set(LOOPS)
