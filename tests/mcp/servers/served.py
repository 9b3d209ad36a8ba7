"""Our own tools, or a whole loop, served with `agentloops.mcp.serve`, for the round trip.

python served.py tools [--http PORT]    three tools of ours
python served.py loop [--http PORT]     a ReAct loop (a deterministic model) as one tool
"""

from __future__ import annotations

import argparse
from typing import Any

from agentloops import (
    ModelRequest,
    ModelResponse,
    ReActLoop,
    ToolResult,
    idempotency_key,
    tool,
)
from agentloops.mcp import serve
from agentloops.testing import FunctionModel, respond, use_tools


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def whoami() -> str:
    """The idempotency key this call runs under."""
    return idempotency_key() or "(no key)"


@tool
def boom(why: str) -> str:
    """Always raises."""
    raise RuntimeError(why)


@tool(read_only=False, on_doubt="rerun")
def bump(counter: str) -> str:
    """Increase a counter (safe to run again)."""
    return f"{counter} + 1"


def agent() -> ReActLoop:
    """Adds the two numbers in the task with its tool, then answers."""

    def model(request: ModelRequest) -> ModelResponse:
        first = request.messages[-1].content[0]
        if isinstance(first, ToolResult):
            return respond(f"The sum is {first.content}.")
        numbers = [int(w) for w in request.messages[-1].text.split() if w.isdigit()]
        if len(numbers) < 2:
            return respond("I need two numbers", stop_reason="max_tokens")
        return use_tools(("add", {"a": numbers[0], "b": numbers[1]}))

    return ReActLoop(FunctionModel(model), [add])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["tools", "loop"])
    parser.add_argument("--http", type=int, default=None)
    options = parser.parse_args()
    served: Any = [add, whoami, boom, bump] if options.what == "tools" else agent()
    transport = "stdio" if options.http is None else "http"
    serve(served, name=f"our-{options.what}", transport=transport, port=options.http or 0)


if __name__ == "__main__":
    main()
