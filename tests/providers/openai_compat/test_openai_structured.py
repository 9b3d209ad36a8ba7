"""Structured output: json_schema, json_object with a schema, or the prompt, and the fallbacks."""

from __future__ import annotations

import httpx
import pytest
from _openai_fakes import BASE, City, ask, completion, ok, sent

from agentloops import (
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatModel,
    ask_structured,
)
from agentloops.model import OutputSchema
from agentloops.providers.openai_compat import DEFAULT_MAX_TOKENS

# -- structured output -----------------------------------------------------------------


def test_structured_output_through_response_format(server, model):
    server.side_effect = [ok(completion('{"name": "Oslo", "population": 700000}'))]
    reply = ask_structured(model, City, "Biggest city in Norway?")
    assert reply.value == City(name="Oslo", population=700000)
    body = sent(server)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "City"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["name", "population"]
    assert "messages" in body and body["messages"][0]["role"] == "user"


LLAMA_CPP_PYTHON_500 = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
        "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
        "'input': 'json_schema'}",
        "type": "internal_server_error",
    }
}


def test_a_refused_format_moves_to_json_object_then_to_the_prompt_for_good(server, model):
    refused = {"error": {"message": "response_format is not supported"}}
    server.side_effect = [
        httpx.Response(400, json=refused),
        httpx.Response(422, json=refused),
        ok(completion('```json\n{"name": "Oslo", "population": 1}\n```')),
        ok(completion('{"name": "Rome", "population": 2}')),
    ]
    assert ask_structured(model, City, "Norway?", system="Be exact.").value.name == "Oslo"
    assert ask_structured(model, City, "Italy?").value.name == "Rome"
    bodies = [sent(server, i) for i in range(4)]
    assert [b.get("response_format", {}).get("type") for b in bodies] == [
        "json_schema",
        "json_object",
        None,
        None,  # remembered
    ]
    assert bodies[1]["response_format"]["schema"]["required"] == ["name", "population"]
    system = bodies[2]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be exact.")
    assert '"population"' in system["content"] and "JSON Schema" in system["content"]
    assert model.structured == "auto"  # the setting; what is sent moved down


def test_llama_cpp_pythons_500_for_json_schema_is_a_refusal_and_spends_no_retry(server, sleeps):
    server.side_effect = [
        httpx.Response(500, json=LLAMA_CPP_PYTHON_500),
        ok(completion('{"name": "Oslo", "population": 700000}')),
    ]
    m = OpenAICompatModel(BASE, "m", max_retries=0, sleep=sleeps)
    assert ask_structured(m, City, "Norway?").value.population == 700000
    assert sleeps == []  # decided from the body, at once
    grammar = sent(server)["response_format"]
    assert grammar == {"type": "json_object", "schema": City.model_json_schema()}
    assert "JSON Schema" in sent(server)["messages"][0]["content"]  # and in the prompt


def test_a_5xx_that_names_no_parameter_is_retried_not_taken_for_a_refusal(server, model, sleeps):
    server.side_effect = [
        httpx.Response(500, json={"error": {"message": "CUDA out of memory"}}),
        ok(completion('{"name": "Oslo", "population": 1}')),
    ]
    ask_structured(model, City, "Norway?")
    assert [sent(server, i)["response_format"]["type"] for i in range(2)] == ["json_schema"] * 2
    assert len(sleeps) == 1


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
def test_a_mode_you_chose_does_not_fall_back(server, mode):
    server.side_effect = [httpx.Response(400, text="unknown field response_format")]
    m = OpenAICompatModel(BASE, "m", structured=mode)
    with pytest.raises(ModelError, match="HTTP 400: unknown field response_format"):
        m.complete(ModelRequest("", [Message.user("x")], output=OutputSchema("C", {})))
    assert sent(server)["response_format"]["type"] == mode


def test_a_raw_newline_inside_a_json_string_parses(server, model):
    server.side_effect = [ok(completion('{"name": "New\nYork", "population": 8}'))]
    response = model.complete(ask(output=OutputSchema("City", City.model_json_schema())))
    assert response.output == {"name": "New\nYork", "population": 8}


def test_a_reply_cut_off_by_the_limit_says_max_tokens_and_has_no_output(server, model):
    server.side_effect = [ok(completion('{"name": "Os', finish="length"))]
    response = model.complete(ask(output=OutputSchema("City", City.model_json_schema())))
    assert (response.stop_reason, response.output) == ("max_tokens", None)


# -- the output limit ------------------------------------------------------------------


def test_a_bounded_max_tokens_is_always_sent(server):
    server.side_effect = [ok(completion("x")) for _ in range(3)]
    OpenAICompatModel(BASE, "m").complete(ask())
    OpenAICompatModel(BASE, "m", max_tokens=None).complete(ask())
    OpenAICompatModel(BASE, "m", max_tokens=300).complete(ask(max_tokens=20))
    assert [sent(server, i)["max_tokens"] for i in range(3)] == [DEFAULT_MAX_TOKENS] * 2 + [20]
    assert DEFAULT_MAX_TOKENS == 1024


def test_a_server_that_wants_max_completion_tokens_gets_it_from_then_on(server, model, sleeps):
    wants = "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
    wants += "'max_completion_tokens' instead."
    server.side_effect = [
        httpx.Response(400, json={"error": {"message": wants}}),
        ok(completion("a")),
        ok(completion("b")),
    ]
    assert model.complete(ask()).message.text == "a"
    assert model.complete(ask()).message.text == "b"
    first, second, third = (sent(server, i) for i in range(3))
    assert "max_tokens" in first and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == third["max_completion_tokens"] == 1024
    assert "max_tokens" not in second and sleeps == []


def test_max_completion_tokens_in_extra_body_replaces_max_tokens(server):
    server.side_effect = [ok(completion("x"))]
    OpenAICompatModel(BASE, "m", extra_body={"max_completion_tokens": 99}).complete(ask())
    assert "max_tokens" not in sent(server) and sent(server)["max_completion_tokens"] == 99


def test_structured_prompt_mode_never_sends_response_format(server):
    server.side_effect = [ok(completion("not json")), ok(completion('{"name":"A","population":1}'))]
    m = OpenAICompatModel(BASE, "m", structured="prompt")
    request = ModelRequest("", [Message.user("x")], output=OutputSchema("City!", {}))
    assert m.complete(request).output is None  # unparseable: ask_structured re-asks
    assert ask_structured(m, City, "x").value.name == "A"
    assert all("response_format" not in sent(server, i) for i in range(2))
