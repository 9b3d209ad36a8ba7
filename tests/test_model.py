import pytest

from agentloops import Message, ModelClient, ModelRequest, ModelResponse, OutputSchema, Usage
from agentloops.testing import ScriptedModel


def test_usage_adds_field_by_field():
    a = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4)
    b = Usage(input_tokens=10, output_tokens=20, cache_read_tokens=30, cache_write_tokens=40)
    total = a + b
    assert total == Usage(
        input_tokens=11, output_tokens=22, cache_read_tokens=33, cache_write_tokens=44
    )
    assert total.total_input_tokens == 11 + 33 + 44
    assert total.total_tokens == 11 + 33 + 44 + 22
    assert sum([a, b], Usage()) == total


def test_usage_add_rejects_other_types():
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_request_defaults_and_protocol():
    request = ModelRequest("sys", [Message.user("q")])
    assert request.tools == [] and request.tool_choice == "auto" and request.output is None
    assert isinstance(ScriptedModel([]), ModelClient)
    schema = OutputSchema("X", {"type": "object"})
    assert schema.name == "X"
    response = ModelResponse(Message.assistant("a"), "end_turn")
    assert response.usage == Usage() and response.output is None
