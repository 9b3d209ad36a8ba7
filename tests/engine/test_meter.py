"""Money and time on the loops: what a run cost (in all and per role), `max_cost` stopping
a run before the call that would start once the cap is spent (across a Plan-and-Execute
run's steps too), a cap without a price refused, and `deadline=` bounding a run."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest
import respx

from agentloops import (
    AnthropicModel,
    BudgetExceeded,
    ConfigurationError,
    DeadlineExceeded,
    FallbackModel,
    JSONLSink,
    ModelCallFinished,
    ModelError,
    ModelRequest,
    ModelResponse,
    OpenAICompatModel,
    Price,
    RunFinished,
    Usage,
    compare,
    tool,
    validate_transcript,
)
from agentloops.journal import MemoryStore
from agentloops.testing import FunctionModel, ScriptedModel, respond, respond_structured, use_tools

DOLLAR_A_TOKEN = Price(input=1_000_000, output=1_000_000)
"""One dollar per token of any kind: costs are token counts, easy to work out by hand."""
FIVE = Usage(input_tokens=3, output_tokens=2)
"""A call that costs $5 at a dollar a token."""
HAIKU = Price(input="1", output="5", cache_read="0.1", cache_write="1.25")
ONE_STEP = {
    "steps": [
        {"step_id": "#E1", "description": "d", "tool_name": "lookup", "tool_args": {"q": "x"}}
    ]
}


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def calls(n: int, then: str = "done") -> list[Any]:
    return [use_tools(("lookup", {"q": str(i)}), usage=FIVE) for i in range(n)] + [
        respond(then, usage=FIVE)
    ]


# -- what a run cost -------------------------------------------------------------------------


def test_a_priced_run_reports_its_cost_exactly(ReActLoop: Any) -> None:
    usage = Usage(
        input_tokens=1200, output_tokens=300, cache_read_tokens=5000, cache_write_tokens=800
    )
    model = ScriptedModel(
        [use_tools(("lookup", {"q": "x"}), usage=usage), respond("ok", usage=usage)]
    )
    result = ReActLoop(model, [lookup], price=HAIKU).run("go")
    # per call: 1200*1 + 300*5 + 5000*0.1 + 800*1.25 = 1200 + 1500 + 500 + 1000 = 4200 per million
    assert result.cost == Decimal("0.0084")  # two calls
    assert result.cost_by_role == {"react": Decimal("0.0084")}


def test_a_run_with_no_known_price_reports_none(ReActLoop: Any) -> None:
    result = ReActLoop(ScriptedModel(["ok"]), []).run("go")
    assert result.cost is None and result.cost_by_role == {}


def test_a_client_from_the_table_is_priced_without_being_told(messages_route: respx.Route) -> None:
    from _anthropic_helpers import reply, text

    from agentloops import ReActLoop

    messages_route.mock(
        return_value=reply(text("ok"), usage={"input_tokens": 1000, "output_tokens": 100})
    )
    model = AnthropicModel("claude-haiku-4-5", client=anthropic.Anthropic(api_key="k"))
    result = ReActLoop(model, []).run("go")
    assert result.cost == Decimal("0.0015")  # 1000 * $1 + 100 * $5, per million


def test_events_carry_each_calls_cost_and_role(ReActLoop: Any, tmp_path: Any) -> None:
    events: list[Any] = []
    ReActLoop(ScriptedModel(calls(1)), [lookup], price=DOLLAR_A_TOKEN, on_event=events.append).run(
        "go"
    )
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert [(e.cost, e.role) for e in finished] == [(Decimal(5), "react"), (Decimal(5), "react")]
    with JSONLSink(tmp_path / "events.jsonl") as sink:
        sink(finished[0])
    assert '"cost": "5"' in (tmp_path / "events.jsonl").read_text()  # exact, as text


def test_rewoo_reports_the_cost_per_role(ReWOOPipeline: Any) -> None:
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "d", "tool_name": "lookup", "tool_args": {"q": "x"}}
        ]
    }
    model = ScriptedModel(
        [respond_structured(plan, usage=FIVE), respond("answer", usage=Usage(output_tokens=1))]
    )
    result = ReWOOPipeline(model, [lookup], price=DOLLAR_A_TOKEN).run("go")
    assert result.cost == 6
    assert result.cost_by_role == {"planner": 5, "solver": 1}


def plan_of(n: int) -> ModelResponse:
    steps = [{"step_number": i, "description": f"step {i}"} for i in range(1, n + 1)]
    return respond_structured({"steps": steps}, usage=FIVE)


def test_plan_and_execute_reports_the_cost_per_role(PlanAndExecute: Any) -> None:
    model = ScriptedModel([plan_of(1), *calls(1, then="found"), respond("report", usage=FIVE)])
    result = PlanAndExecute(model, [lookup], price=DOLLAR_A_TOKEN).run("go")
    assert result.answer == "report"
    assert result.cost == 20
    assert result.cost_by_role == {"planner": 5, "executor": 10, "reporter": 5}


# -- max_cost --------------------------------------------------------------------------------


def test_max_cost_stops_before_the_call_that_would_start_once_the_cap_is_spent(
    ReActLoop: Any,
) -> None:
    model = ScriptedModel(calls(5))
    result = ReActLoop(model, [lookup], price=DOLLAR_A_TOKEN, max_cost=8).run("go")
    # call 1: $5 (under 8), call 2: $10 (the cap is spent), call 3 never starts
    assert model.calls == 2
    assert result.stop_reason == "budget"
    assert result.cost == 10
    assert "max_cost=8 reached after 10 spent" in result.detail
    validate_transcript(result.messages)  # ends on the tool results: valid to send again
    assert result.messages[-1].role == "user"
    with pytest.raises(BudgetExceeded) as info:
        result.raise_for_stop()
    assert info.value.result is result


def test_a_cap_under_one_call_lets_the_first_call_run(ReActLoop: Any) -> None:
    model = ScriptedModel(calls(2))
    result = ReActLoop(model, [lookup], price=DOLLAR_A_TOKEN, max_cost="0.5").run("go")
    assert model.calls == 1 and result.stop_reason == "budget"


def test_a_cap_that_is_never_reached_changes_nothing(ReActLoop: Any) -> None:
    result = ReActLoop(ScriptedModel(calls(2)), [lookup], price=DOLLAR_A_TOKEN, max_cost=100).run(
        "go"
    )
    assert result.stop_reason == "answered" and result.cost == 15


def test_the_run_finished_event_says_budget(ReActLoop: Any) -> None:
    events: list[Any] = []
    loop = ReActLoop(
        ScriptedModel(calls(3)), [lookup], price=DOLLAR_A_TOKEN, max_cost=5, on_event=events.append
    )
    assert loop.run("go").stop_reason == "budget"
    assert [e.stop_reason for e in events if isinstance(e, RunFinished)] == ["budget"]


def test_max_cost_holds_across_a_plan_and_execute_runs_steps(PlanAndExecute: Any) -> None:
    # planner $5; step 1: two calls ($10, cost now 15); step 2: its first call brings the
    # cost to 20, the cap; its second call must not start, nor the reporter
    model = ScriptedModel([plan_of(3), *calls(1), *calls(3)])
    result = PlanAndExecute(model, [lookup], price=DOLLAR_A_TOKEN, max_cost=20).run("go")
    assert result.stop_reason == "budget"
    assert model.calls == 4
    assert result.cost == 20 and result.cost_by_role == {"planner": 5, "executor": 15}
    assert result.step_status[0] == "done" and result.step_results[0] == "done"


def test_max_cost_stops_rewoo_before_its_solver(ReWOOPipeline: Any) -> None:
    plan = {
        "steps": [
            {"step_id": "#E1", "description": "d", "tool_name": "lookup", "tool_args": {"q": "x"}}
        ]
    }
    model = ScriptedModel([respond_structured(plan, usage=FIVE), "never"])
    result = ReWOOPipeline(model, [lookup], price=DOLLAR_A_TOKEN, max_cost=5).run("go")
    assert result.stop_reason == "budget" and model.calls == 1
    assert result.evidence["#E1"].content == "found x"  # the work done is kept


def test_a_cap_with_no_known_price_is_refused_when_the_loop_is_built() -> None:
    from agentloops import PlanAndExecute, ReActLoop, ReWOOPipeline

    with pytest.raises(ConfigurationError, match="no known price for ScriptedModel"):
        ReActLoop(ScriptedModel([]), [], max_cost=1)
    priced = ScriptedModel([])
    priced.model = "claude-haiku-4-5"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="my-model"):
        unpriced = ScriptedModel([])
        unpriced.model = "my-model"  # type: ignore[attr-defined]
        PlanAndExecute(priced, [], reporter=unpriced, max_cost=1)
    with pytest.raises(ConfigurationError, match="my-backup"):
        backup = ScriptedModel([])
        backup.model = "my-backup"  # type: ignore[attr-defined]
        ReWOOPipeline(FallbackModel([priced, backup]), [], max_cost=1)
    # priced on the loop, on the client, or through the table: accepted
    ReActLoop(ScriptedModel([]), [], max_cost=1, price=HAIKU)
    ReActLoop(priced, [], max_cost=1)
    ReActLoop(FallbackModel([priced, backup]), [], max_cost=1, price={"my-backup": HAIKU})


@pytest.mark.parametrize("bad", [-1, "lots", float("nan")])
def test_a_cap_that_is_not_an_amount_is_refused(bad: Any) -> None:
    from agentloops import ReActLoop

    with pytest.raises(ConfigurationError, match="max_cost"):
        ReActLoop(ScriptedModel([]), [], max_cost=bad, price=HAIKU)


def test_a_fallback_chain_is_charged_at_the_price_of_the_model_that_answered(
    ReActLoop: Any,
) -> None:
    big, small = ScriptedModel([ModelError("busy", status=529)]), ScriptedModel([])
    big.model, small.model = "claude-opus-4-8", "claude-haiku-4-5"  # type: ignore[attr-defined]
    small.script.append(
        ModelResponse(
            respond("ok").message, "end_turn", Usage(input_tokens=1000), model="claude-haiku-4-5"
        )
    )
    result = ReActLoop(FallbackModel([big, small]), [], max_cost=1).run("go")
    assert result.cost == Decimal("0.001")  # Haiku's $1 per million, not Opus's $5


def test_a_resumed_run_counts_what_it_spent_before(ReActLoop: Any) -> None:
    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish."""
        return "published"

    store = MemoryStore()
    model = ScriptedModel(
        [use_tools(("publish", {"text": "hi"}), usage=FIVE), respond("a", usage=FIVE), "never"]
    )
    loop = ReActLoop(model, [publish], store=store, price=DOLLAR_A_TOKEN, max_cost=10)
    paused = loop.run("go", run_id="r")
    assert paused.cost == 5
    done = loop.resume("r", {paused.pending_approvals[0].id: True})
    assert done.answer == "a" and done.cost == 10  # the first call, replayed, counts


# -- deadline --------------------------------------------------------------------------------


def slow(seconds: float) -> FunctionModel:
    """A model that takes `seconds`, or gives up with a timeout when the call has less."""

    def answer(request: ModelRequest) -> ModelResponse:
        if request.timeout is not None and request.timeout < seconds:
            time.sleep(max(request.timeout, 0))
            raise ModelError("timed out", kind="timeout")
        time.sleep(seconds)
        return use_tools(("lookup", {"q": "x"}))

    return FunctionModel(answer)


def test_a_call_cut_short_by_the_deadline_stops_the_run(ReActLoop: Any) -> None:
    model = slow(0.3)
    result = ReActLoop(model, [lookup], deadline=0.1).run("go")
    assert result.stop_reason == "deadline"
    assert "deadline=0.1s passed" in result.detail
    assert model.requests[0].timeout is not None and model.requests[0].timeout <= 0.1
    with pytest.raises(DeadlineExceeded):
        result.raise_for_stop()


def test_no_call_starts_after_the_deadline(ReActLoop: Any) -> None:
    @tool
    def slow_tool() -> str:
        """Takes a while."""
        time.sleep(0.2)
        return "late"

    model = ScriptedModel([use_tools(("slow_tool", {})), "never"])
    result = ReActLoop(model, [slow_tool], deadline=0.1).run("go")
    assert result.stop_reason == "deadline" and model.calls == 1
    assert result.messages[-1].content[0].content == "late"  # the tool that started finished
    validate_transcript(result.messages)


def test_each_call_gets_what_is_left_of_the_deadline(ReActLoop: Any) -> None:
    model = ScriptedModel(calls(2))
    ReActLoop(model, [lookup], deadline=60).run("go")
    timeouts = [r.timeout for r in model.requests]
    assert all(t is not None and 0 < t <= 60 for t in timeouts)
    assert timeouts == sorted(timeouts, reverse=True)  # shrinking


def test_a_deadline_must_be_positive() -> None:
    from agentloops import ReActLoop

    with pytest.raises(ConfigurationError, match="deadline"):
        ReActLoop(ScriptedModel([]), [], deadline=0)


def test_the_deadline_reaches_the_http_call() -> None:
    from agentloops import ReActLoop

    base = "http://llm.test/v1"
    body = {
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ]
    }
    with respx.mock(base_url=base) as router:
        route = router.post("/chat/completions").mock(return_value=httpx.Response(200, json=body))
        ReActLoop(OpenAICompatModel(base, "m"), [], deadline=5).run("go")
    assert route.calls[0].request.extensions["timeout"]["read"] <= 5


def test_a_plan_and_execute_run_stops_at_its_deadline(PlanAndExecute: Any) -> None:
    @tool
    def slow_tool() -> str:
        """Takes a while."""
        time.sleep(0.2)
        return "late"

    model = ScriptedModel([plan_of(2), use_tools(("slow_tool", {})), "never", "never"])
    result = PlanAndExecute(model, [slow_tool], deadline=0.1).run("go")
    assert result.stop_reason == "deadline" and model.calls == 2


# -- compare ---------------------------------------------------------------------------------


def test_compare_reports_cost_per_run_and_per_role(tmp_path: Any) -> None:
    from agentloops import PlanAndExecute, ReActLoop

    def react(on_event: Any) -> Any:
        return ReActLoop(
            ScriptedModel(calls(1, then="42")), [lookup], price=DOLLAR_A_TOKEN, on_event=on_event
        )

    def plan_execute(on_event: Any) -> Any:
        script = [plan_of(1), *calls(0, then="found"), respond("42", usage=FIVE)]
        return PlanAndExecute(
            ScriptedModel(script), [lookup], price=DOLLAR_A_TOKEN, on_event=on_event
        )

    def unpriced(on_event: Any) -> Any:
        return ReActLoop(ScriptedModel(["42"]), [], on_event=on_event)

    result = compare(
        {"react": react, "plan_execute": plan_execute, "unpriced": unpriced},
        ["q"],
        checker=lambda task, answer: answer == "42",
        trials=2,
    )
    react_s, pe_s, none_s = result.summaries()
    assert react_s.cost == 20 and react_s.cost_per_attempt == 10  # two runs of two calls
    assert pe_s.cost_by_role == {"planner": 10, "executor": 10, "reporter": 10}
    assert none_s.cost is None and none_s.cost_per_attempt is None
    assert result.attempts[0].cost == 10
    table = result.table()
    assert "| cost |" in table and "| 10.0000 |" in table and "| - |" in table
    csv = result.to_csv(tmp_path / "c.csv").read_text()
    assert csv.splitlines()[0].endswith(",cost") and ",20\n" in csv.replace("\r", "")


def test_a_raised_attempt_still_counts_its_cost() -> None:
    from agentloops import ReActLoop

    def failing(on_event: Any) -> Any:
        script = [use_tools(("lookup", {"q": "x"}), usage=FIVE), ModelError("down", status=500)]
        return ReActLoop(ScriptedModel(script), [lookup], price=DOLLAR_A_TOKEN, on_event=on_event)

    result = compare({"failing": failing}, ["q"], checker=lambda t, a: True)
    assert result.attempts[0].error and result.attempts[0].cost == 5


def test_a_priced_loop_with_a_deadline_pickles_and_runs_after_unpickling() -> None:
    import pickle

    from agentloops import ReActLoop

    loop = ReActLoop(PlainHaiku(), [], max_cost=1, deadline=60)
    copy = pickle.loads(pickle.dumps(loop))
    assert copy.run("go").cost == Decimal("0.001")


class PlainHaiku:
    """A picklable model (the scripted fakes hold locks), priced through the table."""

    model = "claude-haiku-4-5"

    def complete(self, request: ModelRequest) -> ModelResponse:
        return respond("ok", usage=Usage(input_tokens=1000))


def test_a_priced_stream_closed_early_ends_the_run_quietly() -> None:
    from agentloops import ReActLoop

    model = ScriptedModel(calls(3))
    items = ReActLoop(model, [lookup], price=DOLLAR_A_TOKEN, deadline=60).stream("go")
    first = next(items)
    items.close()
    assert type(first).__name__ == "RunStarted" and model.calls == 0


def test_a_priced_stream_ends_with_the_priced_result() -> None:
    from agentloops import ReActLoop, ReActResult

    items = list(ReActLoop(ScriptedModel(calls(1)), [lookup], price=DOLLAR_A_TOKEN).stream("go"))
    assert isinstance(items[-1], ReActResult) and items[-1].cost == 10
