"""Events: JSON-ready dicts, and the JSONL sink."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pydantic

from agentloops import (
    JSONLSink,
    Message,
    ModelCallFinished,
    PlanMade,
    StepFinished,
    ToolCall,
    ToolCallFinished,
    ToolOutcome,
    Usage,
    event_to_dict,
)
from agentloops.events import ApprovalRequested


class Plan(pydantic.BaseModel):
    steps: list[str]


def test_event_to_dict_makes_every_field_plain() -> None:
    finished = ModelCallFinished(
        loop="react", run_id="r", at=1.5, step=0, stop_reason="end_turn",
        usage=Usage(input_tokens=3), model="m", seconds=0.1,
    )  # fmt: skip
    data = event_to_dict(finished)
    assert data["event"] == "ModelCallFinished" and data["at"] == 1.5
    assert data["usage"] == {
        "input_tokens": 3, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
    }  # fmt: skip
    tool = event_to_dict(
        ToolCallFinished(
            loop="react", run_id="r", call_id="c", name="t", outcome=ToolOutcome(content="x")
        )
    )
    assert tool["outcome"] == {"content": "x", "is_error": False, "seconds": 0.0}
    plan = event_to_dict(PlanMade(loop="rewoo", run_id="r", plan=Plan(steps=["a"])))
    assert plan["plan"] == {"steps": ["a"]}
    pending = event_to_dict(
        ApprovalRequested(loop="react", run_id="r", calls=[ToolCall("c", "t", {"k": [1, 2]})])
    )
    assert pending["calls"] == [
        {"type": "tool_call", "id": "c", "name": "t", "args": {"k": [1, 2]}}
    ]
    mixed = event_to_dict(PlanMade(loop="x", run_id="r", plan={"m": Message.user("hi")}))
    assert mixed["plan"] == {"m": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}
    json.dumps([data, tool, plan, pending, mixed])


def test_jsonl_sink_writes_one_line_per_event_from_many_threads(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with JSONLSink(path) as sink:
        threads = [
            threading.Thread(
                target=sink,
                args=(StepFinished(loop="x", run_id=str(i), step_id="s", ok=True, seconds=0),),
            )
            for i in range(20)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sorted(int(json.loads(line)["run_id"]) for line in lines) == list(range(20))
