"""A ReAct run you can watch offline: a scripted model drives a real tool.

The model is `FunctionModel`, a deterministic stand-in that reads each request and
decides what to do, so the loop, the tool calls and the transcript are all real.
Swap in `AnthropicModel()` (with ANTHROPIC_API_KEY set) for a real model.
"""

from __future__ import annotations

import math

from agentloops import ModelRequest, ModelResponse, ReActLoop, tool
from agentloops.testing import FunctionModel, respond, use_tools


@tool
def circle_area(radius: float) -> float:
    """Area of a circle.

    Args:
        radius: the radius, in metres
    """
    return round(math.pi * radius**2, 3)


def stand_in_model(request: ModelRequest) -> ModelResponse:
    """Ask for both areas in one turn (they run in parallel), then answer from the results."""
    last = request.messages[-1]
    if not last.tool_results:
        return use_tools(("circle_area", {"radius": 1.5}), ("circle_area", {"radius": 2}))
    small, large = (float(r.content) for r in last.tool_results)
    return respond(f"The two circles cover {small + large:.3f} m² together.")


def main() -> None:
    print("Offline demo: a deterministic stand-in model drives a real tool.\n")
    loop = ReActLoop(FunctionModel(stand_in_model), [circle_area], max_steps=5)
    result = loop.run("What area do circles of radius 1.5 m and 2 m cover together?")
    for message in result.messages:
        for block in message.content:
            print(f"  {message.role:>9}: {block}")
    print(f"\nanswer: {result.answer}")
    counts = f"model calls: {result.model_calls}, tool calls: {result.tool_calls}"
    print(f"stop: {result.stop_reason}, {counts}")


if __name__ == "__main__":
    main()
