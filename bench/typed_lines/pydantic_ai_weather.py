"""The typed agent of examples/typed_weather.py, written with pydantic-ai (the `bench`
extra): the answer is a `Forecast`, a tool that wants English city names asks the model to
retry, and an output validator checks the temperature against the tool output.

bench/typed_lines.py counts the lines above `if __name__` in both and runs both.
"""

from __future__ import annotations

from typing import Literal

import pydantic
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models import Model

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


def temperature_seen(ctx: RunContext[None], out: Forecast) -> Forecast:
    parts = [p for m in ctx.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    seen = " ".join(str(p.content) for p in parts)
    if f"{out.temp_c:g} C" not in seen:
        raise ModelRetry(f"{out.temp_c} C is in no tool output; copy it from the weather tool")
    return out


def agent(model: Model | str) -> Agent[None, Forecast]:
    typed = Agent(model, output_type=Forecast, tools=[weather])
    typed.output_validator(temperature_seen)
    return typed


def main(model: Model | str) -> Forecast:
    return agent(model).run_sync("What is the weather in Köln?").output


if __name__ == "__main__":  # pragma: no cover
    print(main("anthropic:claude-sonnet-5"))
