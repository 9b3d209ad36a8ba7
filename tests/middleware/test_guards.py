"""Guardrails on the seam: input, output and tool guards under both drivers, sync and async
checks, a trip's stop reason and event, verdicts journaled (a replay never asks again),
and an input guard alongside the first model call (cancelled under asyncio when it trips)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentloops import (
    ConfigurationError,
    GuardrailTripped,
    GuardTripped,
    InputGuard,
    OutputGuard,
    ToolCall,
    ToolGuard,
    Usage,
    tool,
)
from agentloops import ReActLoop as PlainReAct
from agentloops.journal import MemoryStore
from agentloops.testing import FunctionModel, ScriptedModel, respond, respond_structured, use_tools

ASKED: list[Any] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ASKED.clear()


@tool
def look(key: str) -> str:
    """Look a key up."""
    return f"{key.upper()} secret"


def no_secrets(value: Any, ctx: Any) -> str | None:
    ASKED.append(value)
    text = value if isinstance(value, str) else getattr(value, "content", str(value))
    return "mentions a secret" if "secret" in str(text) else None


async def async_no_secrets(value: Any, ctx: Any) -> str | None:
    await asyncio.sleep(0)
    return no_secrets(value, ctx)


def raising(value: Any, ctx: Any) -> None:
    ASKED.append(value)
    if "secret" in str(value):
        raise GuardrailTripped("raised: a secret")


@pytest.mark.parametrize("check", [no_secrets, async_no_secrets, raising])
def test_an_input_guard_stops_the_run_before_any_model_call(ReActLoop: Any, check: Any) -> None:
    events: list[Any] = []
    model = ScriptedModel([])
    loop = ReActLoop(model, [look], middleware=[InputGuard(check)], on_event=events.append)
    result = loop.run("Tell me the secret.")
    assert result.stop_reason == "guardrail" and model.calls == 0
    assert result.detail.startswith("InputGuard tripped (input): ")
    tripped = [e for e in events if isinstance(e, GuardTripped)]
    assert [(e.guard, e.stage) for e in tripped] == [("InputGuard", "input")]
    assert type(events[-1]).__name__ == "RunFinished" and events[-1].stop_reason == "guardrail"
    assert tripped[0].to_dict()["event"] == "GuardTripped"


def test_an_input_guard_checks_once_and_passes(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    result = ReActLoop(model, [look], middleware=[InputGuard(no_secrets)]).run("Find a.")
    assert result.answer == "A." and ASKED == ["Find a."]


def test_an_output_guard_stops_a_run_whose_answer_trips(ReActLoop: Any) -> None:
    answer = respond("The secret is A.", usage=Usage(output_tokens=5))
    model = ScriptedModel([use_tools(("look", {"key": "a"})), answer])
    result = ReActLoop(model, [look], middleware=[OutputGuard(no_secrets)]).run("Find a.")
    assert result.stop_reason == "guardrail" and result.answer == ""
    assert ASKED == ["The secret is A."]  # the turn that called a tool was not an answer
    assert result.model_calls == 2 and result.usage.output_tokens == 5  # the refused reply's


def test_a_tool_guard_turns_a_call_into_an_error_result_and_the_run_goes_on(
    ReActLoop: Any,
) -> None:
    events: list[Any] = []

    def no_b(call: ToolCall, ctx: Any) -> str | None:
        return "b is off limits" if call.args["key"] == "b" else None

    model = ScriptedModel([use_tools(("look", {"key": "a"}), ("look", {"key": "b"})), "Done."])
    guards = [ToolGuard(no_b), ToolGuard(async_no_secrets, on="result", tools=["look"])]
    result = ReActLoop(model, [look], middleware=guards, on_event=events.append).run("q")
    assert result.answer == "Done."
    results = model.requests[1].messages[-1].content
    assert [(r.content, r.is_error) for r in results] == [  # type: ignore[union-attr]
        ("its result was withheld: guard ToolGuard tripped: mentions a secret", True),
        ("not run: guard ToolGuard tripped: b is off limits", True),
    ]
    stages = [e.stage for e in events if isinstance(e, GuardTripped)]
    assert sorted(stages) == ["tool_call", "tool_result"]


def test_guard_verdicts_are_journaled_and_never_asked_again_on_replay() -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "The secret is A."])
    guards = [InputGuard(no_secrets), ToolGuard(no_secrets, on="result"), OutputGuard(no_secrets)]
    loop = PlainReAct(model, [look], middleware=guards, store=store)
    result = loop.run("Find a.", run_id="r1")
    assert result.stop_reason == "guardrail" and len(ASKED) == 3
    records = [r.data for r in store.read("r1") if r.kind == "guard_checked"]
    assert [(d["stage"], d.get("reason")) for d in records] == [
        ("input", None),
        ("tool_result", "mentions a secret"),
        ("output", "mentions a secret"),
    ]
    ASKED.clear()
    again = loop.resume("r1")  # replayed from the journal: no check, no call
    assert ASKED == [] and again.stop_reason == "guardrail" and model.calls == 2
    assert loop.status("r1").stop_reason == "guardrail"


def test_a_check_must_return_none_or_a_reason() -> None:
    model = ScriptedModel(["A."])
    with pytest.raises(ConfigurationError, match="a check returns None") as failed:
        PlainReAct(model, [], middleware=[InputGuard(lambda v, c: True)]).run("q")
    assert failed.value.result.stop_reason == "error" and model.calls == 0
    with pytest.raises(ConfigurationError):
        ToolGuard(no_secrets, on="both")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        InputGuard("not callable")  # type: ignore[arg-type]


def test_other_loops_and_kits_are_guarded(ReWOOPipeline: Any, Router: Any) -> None:
    plan = {"steps": [{"step_id": "#E1", "description": "look a", "tool_name": "look",
                       "tool_args": {"key": "a"}, "depends_on": []}]}  # fmt: skip
    rewoo = ReWOOPipeline(
        ScriptedModel([respond_structured(plan), "the secret"]),
        [look],
        middleware=[OutputGuard(no_secrets)],
    )
    assert rewoo.run("q").stop_reason == "guardrail"

    router = Router(ScriptedModel([]), {"a": "a", "b": "b"}, default="a",
                    middleware=[InputGuard(no_secrets)])  # fmt: skip
    with pytest.raises(GuardrailTripped, match="mentions a secret") as tripped:
        router.route("the secret route")
    assert (tripped.value.guard, tripped.value.stage) == ("InputGuard", "input")


class _Gate:
    """A check that waits until the test lets it answer, and a model that records whether
    its call was cancelled."""

    def __init__(self, reason: str | None):
        self.reason = reason
        self.release: asyncio.Event | None = None
        self.started: asyncio.Event | None = None
        self.cancelled = False
        self.answered = False

    async def check(self, value: Any, ctx: Any) -> str | None:
        assert self.started is not None and self.release is not None
        await self.started.wait()  # the model call is under way
        await self.release.wait()
        return self.reason

    async def answer(self, request: Any) -> Any:
        assert self.started is not None and self.release is not None
        self.started.set()
        try:
            if self.reason is not None:
                self.release.set()  # the check trips while the call is in flight
                await asyncio.sleep(30)
            else:
                self.release.set()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.answered = True
        return "A."


@pytest.mark.parametrize("reason", [None, "no"])
def test_a_parallel_input_guard_runs_alongside_the_first_call_under_asyncio(
    reason: str | None,
) -> None:
    gate = _Gate(reason)

    async def main() -> Any:
        gate.release, gate.started = asyncio.Event(), asyncio.Event()
        model = FunctionModel(gate.answer)
        loop = PlainReAct(model, [], middleware=[InputGuard(gate.check, parallel=True)])
        return await asyncio.wait_for(loop.arun("q"), 10)

    result = asyncio.run(main())
    if reason is None:
        assert result.answer == "A." and gate.answered and not gate.cancelled
    else:
        assert result.stop_reason == "guardrail" and gate.cancelled and not gate.answered


@pytest.mark.parametrize("reason", [None, "no"])
def test_a_parallel_input_guard_runs_first_under_the_sync_driver(reason: str | None) -> None:
    order: list[str] = []

    def check(value: Any, ctx: Any) -> str | None:
        order.append("check")
        return reason

    def answer(request: Any) -> str:
        order.append("call")
        return "A."

    loop = PlainReAct(FunctionModel(answer), [], middleware=[InputGuard(check, parallel=True)])
    result = loop.run("q")
    assert order == (["check", "call"] if reason is None else ["check"])
    assert result.stop_reason == ("answered" if reason is None else "guardrail")


def test_a_parallel_guards_verdict_and_its_call_are_journaled(ReActLoop: Any) -> None:
    store = MemoryStore()
    model = ScriptedModel(["A."])
    guard = InputGuard(no_secrets, parallel=True)
    loop = ReActLoop(model, [], middleware=[guard], store=store)
    assert loop.run("q", run_id="r1").answer == "A."
    kinds = [r.kind for r in store.read("r1")]
    assert kinds.index("guard_checked") < kinds.index("model")
    ASKED.clear()
    assert loop.resume("r1").answer == "A." and ASKED == [] and model.calls == 1

    tripped = ReActLoop(ScriptedModel([]), [], middleware=[guard], store=store)
    assert tripped.run("a secret", run_id="r2").stop_reason == "guardrail"
    data = [r.data for r in store.read("r2") if r.kind == "guard_checked"]
    assert data[0]["reason"] == "mentions a secret"
    assert "model" not in [r.kind for r in store.read("r2")]


def test_a_journals_trips_replay_as_events() -> None:
    from agentloops.events import replay_events

    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "Done."])
    loop = PlainReAct(model, [look], middleware=[ToolGuard(no_secrets, on="result")], store=store)
    loop.run("q", run_id="r1")
    tripped = [
        e for e in replay_events(store.read("r1"), loop="react") if isinstance(e, GuardTripped)
    ]
    assert [(e.guard, e.stage, e.reason, e.run_id) for e in tripped] == [
        ("ToolGuard", "tool_result", "mentions a secret", "r1")
    ]
