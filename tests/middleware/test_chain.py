"""The middleware seam (`agentloops.middleware`): hooks around every model and tool call of a
run, in chain order, under both drivers and in streams; a hook's own model calls journaled,
metered and counted; a retry after a model error; replay determinism; the fingerprint."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from agentloops import (
    CheckpointError,
    ConfigurationError,
    ContextWindowExceeded,
    Message,
    Middleware,
    MiddlewareContext,
    ModelRequest,
    ModelResponse,
    Price,
    Text,
    ToolCall,
    ToolOutcome,
    Usage,
    tool,
)
from agentloops import ReActLoop as PlainReAct
from agentloops.engine.effects import CallModel, NextTool, StartTool
from agentloops.journal import MemoryStore
from agentloops.middleware import Chain, chained
from agentloops.testing import FunctionModel, ScriptedModel, respond, respond_structured, use_tools

SEEN: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    SEEN.clear()


@tool
def look(key: str) -> str:
    """Look a key up."""
    SEEN.append(f"look {key}")
    return f"{key.upper()} (secret s3cr3t)"


class Redact(Middleware):
    """The docs' example: a secret never reaches the model."""

    def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: MiddlewareContext) -> Any:
        return dataclasses.replace(outcome, content=outcome.content.replace("s3cr3t", "***"))


class Tag(Middleware):
    """Records the order its hooks run in, and marks the system prompt of each request."""

    def __init__(self, tag: str):
        self.tag = tag

    def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> ModelRequest:
        SEEN.append(f"{self.tag}.before_model")
        return dataclasses.replace(request, system=f"{request.system}[{self.tag}]")

    def after_model(
        self, request: ModelRequest, response: ModelResponse, ctx: MiddlewareContext
    ) -> ModelResponse:
        SEEN.append(f"{self.tag}.after_model")
        return response

    def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> ToolCall:
        SEEN.append(f"{self.tag}.before_tool")
        return call

    def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: MiddlewareContext) -> Any:
        SEEN.append(f"{self.tag}.after_tool")
        return outcome

    def fingerprint(self) -> dict[str, object]:
        return {"tag": self.tag}


class Numbered(Middleware):
    """Rewrites every request from what it kept of the run (its state): the transcript the
    model sees is numbered by this middleware's own count of calls."""

    def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> ModelRequest:
        n = ctx.state["n"] = ctx.state.get("n", 0) + 1
        note = Text(f"(call {n} of run {ctx.run_id}, step {ctx.step})")
        first, *rest = request.messages
        return dataclasses.replace(
            request, messages=[Message("user", (note, *first.content)), *rest]
        )


class Summarizer(Middleware):
    """A hook with a model call of its own before each call after the first."""

    def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> Any:
        if ctx.step == 0:
            return request
        summary = yield from ctx.call_model(
            ModelRequest("Summarise.", list(request.messages)), role="compactor"
        )
        text = summary.message.text
        return dataclasses.replace(request, messages=[Message("user", (Text(text),))])


def test_a_machine_with_middleware_is_driven_by_hand() -> None:
    """No driver: the test sends each outcome; the hooks change what it sees."""
    loop = PlainReAct(ScriptedModel([]), [look], middleware=[Redact(), Tag("a")])
    machine = loop.machine("Find a.", run_id="r1")
    effect = next(machine)
    assert type(effect) is CallModel and effect.request.system == "[a]"
    effect = machine.send(use_tools(ToolCall("c1", "look", {"key": "a"})))
    assert type(effect) is StartTool and effect.call.args == {"key": "a"}
    effect = machine.send(None)
    assert type(effect) is NextTool
    effect = machine.send(("c1", ToolOutcome(content="A s3cr3t")))
    assert type(effect) is CallModel
    assert effect.request.messages[-1].content[0].content == "A ***"  # type: ignore[union-attr]
    with pytest.raises(StopIteration) as done:
        machine.send(respond("A."))
    assert done.value.value.answer == "A."
    assert SEEN == [
        "a.before_model",
        "a.after_model",
        "a.before_tool",
        "a.after_tool",
        "a.before_model",
        "a.after_model",
    ]


def test_without_middleware_there_is_no_wrapper() -> None:
    machine = PlainReAct(ScriptedModel([]), []).machine("Hi?", run_id="r1")
    assert chained(machine, Chain(()), loop="react", run_id="r1", task="Hi?", totals=None,
                   parent_run_id=None, observed=False) is machine  # fmt: skip


def test_the_first_middleware_is_outermost(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    ReActLoop(model, [look], middleware=[Tag("a"), Tag("b")]).run("Find a.")
    assert SEEN[:4] == ["a.before_model", "b.before_model", "b.after_model", "a.after_model"]
    assert SEEN[4:9] == ["a.before_tool", "b.before_tool", "look a", "b.after_tool", "a.after_tool"]
    assert model.requests[0].system == "[a][b]"  # a's change, then b's on top


def test_a_secret_is_redacted_before_the_model_sees_it(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    result = ReActLoop(model, [look], middleware=[Redact()]).run("Find a.")
    sent = model.requests[1].messages[-1].content[0]
    assert sent.content == "A (secret ***)"  # type: ignore[union-attr]
    assert "s3cr3t" not in str(result.messages)


def test_before_tool_may_answer_a_call_or_change_its_arguments(ReActLoop: Any) -> None:
    class Cached(Middleware):
        def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> Any:
            if call.args["key"] == "cached":
                return ToolOutcome(content="from the cache")
            return dataclasses.replace(call, args={"key": call.args["key"] + "!"})

    model = ScriptedModel([use_tools(("look", {"key": "cached"}), ("look", {"key": "b"})), "Done."])
    result = ReActLoop(model, [look], middleware=[Cached(), Tag("inner")]).run("q")
    assert SEEN.count("look b!") == 1 and not any("cached" in s for s in SEEN)
    contents = [b.content for b in model.requests[1].messages[-1].content]  # type: ignore[union-attr]
    assert contents == ["from the cache", "B! (secret s3cr3t)"]
    assert result.tool_calls == 2
    # the inner middleware never saw the call the outer one answered
    assert SEEN.count("inner.before_tool") == 1 and SEEN.count("inner.after_tool") == 1


def test_a_changed_call_id_is_refused() -> None:
    class Renames(Middleware):
        def before_tool(self, call: ToolCall, ctx: MiddlewareContext) -> ToolCall:
            return dataclasses.replace(call, id="other")

    model = ScriptedModel([use_tools(("look", {"key": "a"}))])
    with pytest.raises(ConfigurationError, match="changed call id"):
        PlainReAct(model, [look], middleware=[Renames()]).run("q")


def test_middleware_must_be_middleware() -> None:
    with pytest.raises(ConfigurationError, match="Middleware instances"):
        PlainReAct(ScriptedModel([]), [], middleware=[lambda r: r])  # type: ignore[list-item]


def test_a_hooks_model_call_is_counted_metered_and_journaled(ReActLoop: Any) -> None:
    """Its usage counts in the run's totals and its cost under its role; its record has
    the run id and step of the call it precedes, and a replay answers it from there."""
    replies = {"Summarise.": respond("the gist", usage=Usage(input_tokens=5, output_tokens=1))}

    def answer(request: ModelRequest) -> ModelResponse:
        if request.system in replies:
            return replies[request.system]
        if len(request.messages) == 1 and request.messages[0].text == "Find a.":
            return use_tools(ToolCall("c1", "look", {"key": "a"}), usage=Usage(input_tokens=10))
        return respond("A.", usage=Usage(input_tokens=3))

    store = MemoryStore()
    model = FunctionModel(answer)
    loop = ReActLoop(
        model,
        [look],
        middleware=[Summarizer()],
        store=store,
        price=Price(input=1_000_000, output=1_000_000),
    )
    result = loop.run("Find a.", run_id="r1")
    assert result.answer == "A." and result.model_calls == 3
    assert result.usage == Usage(input_tokens=18, output_tokens=1)
    assert result.cost_by_role == {"react": Decimal(13), "compactor": Decimal(6)}
    models = [r.data for r in store.read("r1") if r.kind == "model"]
    assert [(d["run"], d["step"], d.get("role")) for d in models] == [
        ("r1", 0, "react"),
        ("r1", 1, "compactor"),
        ("r1", 1, "react"),
    ]
    assert model.requests[2].messages[0].text == "the gist"
    calls = model.calls
    again = loop.resume("r1")  # a finished run replays from its journal: nothing is asked
    assert model.calls == calls and again.answer == "A." and again.usage == result.usage


def test_a_model_error_is_retried_once_with_the_request_a_hook_gives() -> None:
    class Shorten(Middleware):
        def on_model_error(self, request: ModelRequest, error: Any, ctx: MiddlewareContext) -> Any:
            if isinstance(error, ContextWindowExceeded):
                return dataclasses.replace(request, messages=request.messages[-1:])
            return None

    def answer(request: ModelRequest) -> Any:
        if len(request.messages) > 1:
            raise ContextWindowExceeded("prompt is too long", status=400)
        return (
            "short enough"
            if request.messages[0].text == "Go on."
            else use_tools(ToolCall("c1", "look", {"key": "a"}))
        )

    class Last(Middleware):  # the model answers the last turn only: make it a question
        def before_model(self, request: ModelRequest, ctx: MiddlewareContext) -> ModelRequest:
            if len(request.messages) == 1:
                return request
            return dataclasses.replace(
                request, messages=[*request.messages, Message("user", (Text("Go on."),))]
            )

    store = MemoryStore()
    model = FunctionModel(answer, validate=False)
    loop = PlainReAct(model, [look], middleware=[Shorten(), Last()], store=store)
    result = loop.run("Find a.", run_id="r1")
    assert result.answer == "short enough" and model.calls == 3
    kinds = [r.kind for r in store.read("r1") if r.kind.startswith("model")]
    assert kinds == ["model", "model_failed", "model"]
    again = loop.resume("r1")  # replayed: the failure is raised again, the retry answered
    assert model.calls == 3 and again.answer == "short enough"

    # without a hook that answers it, the error ends the run, and `failed` says why
    plain = PlainReAct(FunctionModel(answer, validate=False), [look], store=store)
    with pytest.raises(ContextWindowExceeded):
        plain.run("Find a.", run_id="r2")
    assert [r.kind for r in store.read("r2")][-1] == "failed"
    assert "model_failed" not in [r.kind for r in store.read("r2")]


def _numbered_runs(loop_cls: Any, store: Any, *, crash: bool) -> list[ModelRequest]:
    """A durable run whose middleware rewrites every request: uninterrupted, or killed
    after its second model call and resumed by run id. The requests the model saw."""

    class Crash(BaseException):
        pass

    script = [
        use_tools(ToolCall("c1", "look", {"key": "a"})),
        use_tools(ToolCall("c2", "look", {"key": "b"})),
        use_tools(ToolCall("c3", "look", {"key": "c"})),
        "Done.",
    ]
    seen: list[ModelRequest] = []
    calls = iter(range(10))

    def answer(request: ModelRequest) -> Any:
        n = next(calls)
        if crash and n == 2:
            raise Crash
        seen.append(request)
        return script[len(seen) - 1]

    model = FunctionModel(answer, validate=False)
    loop = loop_cls(model, [look], middleware=[Numbered()], store=store)
    try:
        loop.run("Find a, b and c.", run_id="r1")
    except Crash:
        loop.resume("r1")
    return seen


def test_a_resumed_run_makes_the_same_requests_as_an_uninterrupted_one(ReActLoop: Any) -> None:
    whole = _numbered_runs(ReActLoop, MemoryStore(), crash=False)
    resumed = _numbered_runs(ReActLoop, MemoryStore(), crash=True)
    assert len(whole) == len(resumed) == 4
    assert [r.messages for r in resumed] == [r.messages for r in whole]
    assert whole[2].messages[0].text.startswith("(call 3 of run r1, step 2)")


def test_a_paused_run_resumed_by_id_makes_the_same_requests(ReActLoop: Any) -> None:
    @tool(read_only=False)
    def send(to: str) -> str:
        """Send."""
        return f"sent to {to}"

    def ask(call: ToolCall) -> str:
        return "ask" if call.name == "send" else "allow"

    def script() -> ScriptedModel:
        return ScriptedModel(
            [use_tools(ToolCall("c1", "look", {"key": "a"})),
             use_tools(ToolCall("s1", "send", {"to": "ann"})), "Sent."]
        )  # fmt: skip

    whole = script()
    ReActLoop(whole, [look, send], middleware=[Numbered()]).run("q", run_id="r1")
    store = MemoryStore()
    model = script()  # one script for both sessions
    loop = ReActLoop(model, [look, send], middleware=[Numbered()], store=store, approval=ask)
    assert loop.run("q", run_id="r1").stop_reason == "approval_required"
    resumed = ReActLoop(model, [look, send], middleware=[Numbered()], store=store, approval=ask)
    assert resumed.resume("r1", {"s1": True}).answer == "Sent."
    assert [r.messages for r in model.requests] == [r.messages for r in whole.requests]
    assert model.requests[2].messages[0].text.startswith("(call 3 of run r1, step 2)")


def test_a_resume_under_another_chain_is_refused_naming_middleware() -> None:
    store = MemoryStore()
    model = ScriptedModel([use_tools(("look", {"key": "a"}))])
    PlainReAct(model, [look], store=store, middleware=[Tag("a")], approval=lambda c: "ask").run(
        "q", run_id="r1"
    )
    other = PlainReAct(ScriptedModel(["A."]), [look], store=store, middleware=[Tag("b")])
    with pytest.raises(CheckpointError, match="middleware"):
        other.status("r1")
    none = PlainReAct(ScriptedModel(["A."]), [look], store=store)
    with pytest.raises(CheckpointError, match="middleware"):
        none.resume("r1", {})
    decisions = {c.id: True for c in PlainReAct(model, [look], store=store,
                 middleware=[Tag("a")]).status("r1").pending_approvals}  # fmt: skip
    result = other.resume("r1", decisions, allow_changes={"middleware"})
    assert result.answer == "A."


def test_every_loop_and_kit_calls_its_hooks(
    ReWOOPipeline: Any, PlanAndExecute: Any, Router: Any, Evaluator: Any
) -> None:
    from agentloops.testing import respond_structured as rs

    plan = {"steps": [{"step_id": "#E1", "description": "look a", "tool_name": "look",
                       "tool_args": {"key": "a"}, "depends_on": []}]}  # fmt: skip
    rewoo = ReWOOPipeline(ScriptedModel([rs(plan), "A."]), [look], middleware=[Tag("w")])
    assert rewoo.run("q").answer == "A."
    assert SEEN.count("w.before_model") == 2 and SEEN.count("w.after_tool") == 1
    SEEN.clear()

    pe_plan = {"steps": [{"step_number": 1, "description": "look a"}]}
    pe = PlanAndExecute(
        ScriptedModel([rs(pe_plan), use_tools(("look", {"key": "a"})), "A.", "Report."]),
        [look],
        middleware=[Tag("p")],
    )
    assert pe.run("q").answer == "Report."
    assert SEEN.count("p.before_model") == 4 and SEEN.count("p.after_tool") == 1
    SEEN.clear()

    router = Router(
        ScriptedModel([rs({"route": "math", "reasoning": "sums"})]),
        {"math": "sums", "chat": "else"},
        default="chat",
        middleware=[Tag("r")],
    )
    assert router.route("2+2?").route == "math" and SEEN == ["r.before_model", "r.after_model"]
    SEEN.clear()

    evaluator = Evaluator(
        ScriptedModel([respond_structured({"verdict": "pass", "reasons": ["fine"]})]),
        middleware=[Tag("e")],
    )
    assert evaluator.evaluate("q", "a").passed and SEEN == ["e.before_model", "e.after_model"]


def test_hooks_run_the_same_in_streams(ReActLoop: Any) -> None:
    model = ScriptedModel([use_tools(("look", {"key": "a"})), "A."])
    items = list(ReActLoop(model, [look], middleware=[Redact(), Tag("s")]).stream("q"))
    assert items[-1].answer == "A."  # type: ignore[union-attr]
    assert model.requests[1].messages[-1].content[0].content == "A (secret ***)"  # type: ignore[union-attr]
    assert SEEN.count("s.before_model") == 2
