"""Peer frameworks on the ReAct overhead task, when the `bench` extra is installed.

Each peer gets the same job as agentloops: a zero-latency fake model that asks for a
trivial tool N times (a new call id and new arguments each time), then answers. Every
`prepare_*` function builds the agent and its scripted replies outside the timing and
returns a zero-argument callable that runs it once, or `None` with a reason when the
peer is not installed.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
from collections.abc import Callable
from typing import Any

Runner = Callable[[], object]


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def prepare_langgraph(
    steps: int, *, checkpointer: Any = None, durability: str | None = None
) -> Runner:
    """LangChain's `create_agent` (a LangGraph graph), or LangGraph's older prebuilt.

    With a `checkpointer`, each run is a new thread and LangGraph saves its checkpoints
    there with the given `durability` ("sync": before the next step; LangGraph's default
    "async": while the next step runs; "exit": at the end).
    """
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    try:
        from langchain.agents import create_agent
    except ImportError:  # only langgraph installed: its prebuilt (deprecated in 1.x)
        from langgraph.prebuilt import create_react_agent as create_agent

    class FakeChat(GenericFakeChatModel):
        """Replies from an iterator; binding tools is a no-op (the replies are fixed)."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    replies = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "add", "args": {"a": i, "b": 1}, "id": f"call_{i}", "type": "tool_call"}
            ],
        )
        for i in range(steps)
    ]
    replies.append(AIMessage(content="done"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_agent(FakeChat(messages=iter(replies)), [add], checkpointer=checkpointer)
    # Each step is two graph nodes (model, tools); the default limit would stop the run.
    config: dict[str, Any] = {"recursion_limit": 2 * steps + 10}
    options: dict[str, Any] = {}
    if checkpointer is not None:
        config["configurable"] = {"thread_id": uuid.uuid4().hex}
        options["durability"] = durability

    def run() -> object:
        out = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config, **options)
        assert out["messages"][-1].content == "done", out["messages"][-1]
        return out

    return run


def prepare_pydantic_ai(steps: int) -> Runner:
    """A pydantic-ai `Agent` over its `FunctionModel` test double."""
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    replies = [
        ModelResponse(parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call_{i}")])
        for i in range(steps)
    ]
    replies.append(ModelResponse(parts=[TextPart("done")]))
    script = iter(replies)

    def reply(messages: Any, info: Any) -> Any:
        return next(script)

    agent = Agent(FunctionModel(reply), tools=[add])
    limits = UsageLimits(request_limit=None)  # the default stops at 50 requests

    def run() -> object:
        out = agent.run_sync("go", usage_limits=limits)
        assert out.output == "done", out.output
        return out

    return run


PEERS: dict[str, Callable[[int], Runner]] = {
    "langgraph": prepare_langgraph,
    "pydantic-ai": prepare_pydantic_ai,
}
MODULES = {"langgraph": ("langgraph", "langchain_core"), "pydantic-ai": ("pydantic_ai",)}
DISTRIBUTIONS = {
    "langgraph": ("langgraph", "langchain", "langchain-core"),
    "pydantic-ai": ("pydantic-ai-slim",),
}


def versions(peer: str) -> str:
    """The installed versions a peer's figures belong to."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in DISTRIBUTIONS[peer]:
        with contextlib.suppress(PackageNotFoundError):  # langchain is optional
            found.append(f"{dist} {version(dist)}")
    return ", ".join(found)


def missing(peer: str) -> str | None:
    """Why a peer cannot run here, or None when it can."""
    import importlib.util

    absent = [m for m in MODULES[peer] if importlib.util.find_spec(m) is None]
    if absent:
        return f"{peer}: not installed ({', '.join(absent)}); pip install -e '.[bench]'"
    return None
