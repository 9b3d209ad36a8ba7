"""examples/typed_weather.py, the typed agent docs/typed-output.md counts against pydantic-ai:
the tool's ModelRetry and the validator's each send the model back once."""

from __future__ import annotations

import typed_weather

from agentloops.testing import ScriptedModel, respond_structured, use_tools


def test_the_typed_weather_agent_retries_the_name_and_the_figure() -> None:
    answer = {"city": "Cologne", "temp_c": 12, "sky": "cloudy"}
    model = ScriptedModel(
        [
            use_tools(("weather", {"city": "Köln"})),
            use_tools(("weather", {"city": "Cologne"})),
            respond_structured({**answer, "temp_c": 13}),
            respond_structured(answer),
        ]
    )
    assert typed_weather.main(model) == typed_weather.Forecast(**answer)
    model.assert_complete()
    refused = model.requests[1].messages[-1].tool_results[0]
    assert refused.is_error and "use the English name" in refused.content
    assert "13.0 C is in no tool output" in model.requests[3].messages[-1].text
