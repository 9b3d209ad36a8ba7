"""The journal's codec: a model response's record holds every field of its usage."""

from __future__ import annotations

import dataclasses

from agentloops import Message, ModelResponse, Usage
from agentloops.engine import _codec


def test_a_response_record_holds_every_usage_field_and_reads_back() -> None:
    usage = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4)
    response = ModelResponse(Message.assistant("hi"), "end_turn", usage, "m")
    data = _codec.response_to_dict(response)
    assert data["usage"] == dataclasses.asdict(usage)  # a new Usage field must be written too
    assert _codec.response_from_dict(data).usage == usage
