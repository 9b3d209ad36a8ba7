"""A typed ReAct agent: the answer is a `Forecast`, a tool that wants English city names asks
the model to retry, and an output validator checks the temperature against the tool output.

    .venv/bin/python examples/typed_weather.py     # Claude (ANTHROPIC_API_KEY), or offline

The same agent in pydantic-ai is bench/typed_lines/pydantic_ai_weather.py; bench/typed_lines.py
counts the lines of both (docs/typed-output.md).
"""

from __future__ import annotations

from typing import Literal

import pydantic

from agentloops import ModelClient, ModelRetry, OutputContext, ReActLoop

TEMPERATURES = {"Paris": 18, "Cologne": 12, "Rome": 24}


class Forecast(pydantic.BaseModel):
    city: str
    temp_c: float
    sky: Literal["sunny", "cloudy", "rain"]


def weather(city: str) -> str:
    """Today's temperature in a city, by its English name."""
    if city not in TEMPERATURES:
        raise ModelRetry(f"no station named {city!r}: use the English name, e.g. Cologne")
    return f"{city}: {TEMPERATURES[city]} C"


def temperature_seen(out: Forecast, context: OutputContext) -> Forecast:
    seen = " ".join(r.content for m in context.messages for r in m.tool_results)
    if f"{out.temp_c:g} C" not in seen:
        raise ModelRetry(f"{out.temp_c} C is in no tool output; copy it from the weather tool")
    return out


def agent(model: ModelClient) -> ReActLoop:
    return ReActLoop(model, [weather], output_type=Forecast, output_validator=temperature_seen)


def main(model: ModelClient) -> Forecast:
    forecast: Forecast = agent(model).run("What is the weather in Köln?").output
    return forecast


if __name__ == "__main__":  # pragma: no cover (a real model, or the offline stand-in)
    import os

    from agentloops import AnthropicModel
    from agentloops.testing import ScriptedModel, respond_structured, use_tools

    if os.environ.get("ANTHROPIC_API_KEY"):
        print(main(AnthropicModel()))
    else:
        script = [
            use_tools(("weather", {"city": "Köln"})),
            use_tools(("weather", {"city": "Cologne"})),
            respond_structured({"city": "Cologne", "temp_c": 13, "sky": "cloudy"}),  # sent back
            respond_structured({"city": "Cologne", "temp_c": 12, "sky": "cloudy"}),
        ]
        print(main(ScriptedModel(script)))
