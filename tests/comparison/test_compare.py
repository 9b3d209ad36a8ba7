"""compare(): loops side by side, every attempt counted, metrics that add up."""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from agentloops import (
    Comparison,
    ConfigurationError,
    ModelError,
    ReActLoop,
    RunStarted,
    ToolCallFinished,
    ToolOutcome,
    Usage,
    compare,
    tool,
)
from agentloops.model import ModelRequest, ModelResponse
from agentloops.testing import FunctionModel, ScriptedModel, respond, use_tools

CALL = Usage(input_tokens=100, cache_read_tokens=40, cache_write_tokens=20, output_tokens=7)
PRICES = {"AAPL": "190", "MSFT": "410"}
TASKS = ["price of AAPL", "price of MSFT"]


@tool
def price(ticker: str) -> str:
    """The fixture price of a ticker."""
    return PRICES[ticker]  # a KeyError becomes an is_error result


def check(task: str, answer: str) -> bool:
    return answer == PRICES[task.split()[-1]]


def analyst(*, first_ticker: str | None = None) -> FunctionModel:
    """Asks for the task's ticker (or `first_ticker` first), then answers with the last result."""

    def fn(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if not last.tool_results:
            ticker = first_ticker or last.text.split()[-1]
            return use_tools(("price", {"ticker": ticker}), usage=CALL)
        result = last.tool_results[0]
        if result.is_error:
            ticker = request.messages[0].text.split()[-1]
            return use_tools(("price", {"ticker": ticker}), usage=CALL)
        return respond(result.content, usage=CALL)

    return FunctionModel(fn)


def react(model_factory: Any, **options: Any) -> Any:
    return lambda on_event: ReActLoop(model_factory(), [price], on_event=on_event, **options)


def test_metrics_add_up_exactly() -> None:
    loops = {"direct": react(analyst), "stumbling": react(lambda: analyst(first_ticker="NOPE"))}
    result = compare(loops, TASKS, checker=check, trials=2)

    assert result.loops == ("direct", "stumbling")
    assert len(result.attempts) == 2 * 2 * 2
    direct, stumbling = result.summaries()
    assert direct == result.summary("direct")
    assert (direct.attempts, direct.successes, direct.errors) == (4, 4, 0)
    assert (direct.model_calls, direct.tool_calls, direct.tool_errors) == (8, 4, 0)
    assert direct.usage == Usage(
        input_tokens=800, cache_read_tokens=320, cache_write_tokens=160, output_tokens=56
    )
    assert (direct.attempts_with_tool_errors, direct.recoveries, direct.recovery_rate) == (0, 0, 0)
    # the stumbling loop calls an unknown ticker first, gets a tool error, and recovers
    assert (stumbling.model_calls, stumbling.tool_calls, stumbling.tool_errors) == (12, 8, 4)
    assert (stumbling.attempts_with_tool_errors, stumbling.recoveries) == (4, 4)
    assert stumbling.recovery_rate == 1.0
    assert stumbling.usage.output_tokens == 12 * 7
    for s in (direct, stumbling):
        mine = [a for a in result.attempts if a.loop == s.loop]
        assert s.seconds == pytest.approx(sum(a.seconds for a in mine))
        assert s.mean(s.model_calls) == s.model_calls / 4
    assert all(a.stop_reason == "answered" and a.error == "" for a in result.attempts)
    assert result.seconds >= sum(a.seconds for a in result.attempts)


def test_trials_repeat_in_start_order() -> None:
    result = compare({"a": react(analyst), "b": react(analyst)}, TASKS, checker=check, trials=3)
    order = [(a.trial, a.task, a.loop) for a in result.attempts]
    expected = [(t, task, loop) for t in range(3) for task in TASKS for loop in ("a", "b")]
    assert order == expected
    assert result.trials == 3
    assert [s.attempts for s in result.summaries()] == [6, 6]


def test_raising_and_failed_attempts_are_counted_not_dropped() -> None:
    broken = ScriptedModel(
        [use_tools(("price", {"ticker": "AAPL"}), usage=CALL), RuntimeError("x")]
    )
    loops = {
        # raises a plain exception after one model call: spent tokens come from the events
        "crashes": lambda on_event: ReActLoop(broken, [price], on_event=on_event),
        # raises ModelError: ReActLoop attaches its partial result, which is used
        "provider_down": react(lambda: ScriptedModel([ModelError("503", status=503)])),
        # returns without an answer: a failure, not an error
        "too_short": react(analyst, max_steps=1),
        # answers, but wrongly
        "wrong": react(lambda: ScriptedModel(["1"])),
    }
    result = compare(loops, TASKS[:1], checker=check)
    by_loop = {a.loop: a for a in result.attempts}
    assert len(result.attempts) == 4
    assert all(not a.success for a in result.attempts)

    crashed = by_loop["crashes"]
    assert (crashed.stop_reason, crashed.error) == ("error", "RuntimeError: x")
    assert (crashed.model_calls, crashed.usage, crashed.tool_calls) == (1, CALL, 1)
    down = by_loop["provider_down"]
    assert (down.error, down.model_calls, down.usage) == ("ModelError: 503", 0, Usage())
    assert (by_loop["too_short"].stop_reason, by_loop["too_short"].error) == ("max_steps", "")
    assert by_loop["wrong"].answer == "1"

    summaries = {s.loop: s for s in result.summaries()}
    assert summaries["crashes"].errors == 1 and summaries["crashes"].attempts == 1
    assert summaries["crashes"].model_calls == 1
    assert summaries["wrong"].errors == 0 and summaries["wrong"].success_rate == 0.0


@dataclass
class JudgeStandIn:
    """Passes whatever it is told to pass; records what it saw."""

    passes: set[str]
    seen: list[tuple[str, str, Any]]

    def evaluate(self, task: str, draft: str, evidence: Any = None) -> Any:
        self.seen.append((task, draft, evidence))
        if draft == "boom":
            raise RuntimeError("judge down")
        return SimpleNamespace(verdict="pass" if draft in self.passes else "fail", reasons=[])


def test_incorrect_acceptance_counts_passes_on_wrong_answers() -> None:
    judge = JudgeStandIn(passes={"190", "999"}, seen=[])
    scripts = {"right": "190", "wrong_passed": "999", "wrong_failed": "5", "judge_fails": "boom"}
    loops = {name: react(lambda a=answer: ScriptedModel([a])) for name, answer in scripts.items()}
    loops["tooled"] = react(analyst)
    result = compare(loops, ["price of AAPL"], checker=check, evaluator=judge)

    verdicts = {a.loop: a.verdict for a in result.attempts}
    assert verdicts == {
        "right": "pass",
        "wrong_passed": "pass",
        "wrong_failed": "fail",
        "judge_fails": "error: RuntimeError: judge down",
        "tooled": "pass",
    }
    incorrect = {a.loop for a in result.attempts if a.incorrect_acceptance}
    assert incorrect == {"wrong_passed"}
    s = {x.loop: x for x in result.summaries()}
    assert (s["wrong_passed"].incorrect_acceptances, s["wrong_passed"].rejected) == (1, 1)
    assert s["wrong_passed"].incorrect_acceptance_rate == 1.0
    assert (s["wrong_failed"].incorrect_acceptances, s["wrong_failed"].rejected) == (0, 1)
    assert (s["judge_fails"].rejected, s["judge_fails"].incorrect_acceptance_rate) == (0, 0.0)
    # the judge sees the task, the answer, and the run's tool outputs as evidence
    assert ("price of AAPL", "190", "price: 190") in judge.seen
    assert ("price of AAPL", "190", "") in judge.seen


def test_evidence_marks_tool_errors() -> None:
    judge = JudgeStandIn(passes=set(), seen=[])
    loops = {"stumbling": react(lambda: analyst(first_ticker="NOPE"))}
    compare(loops, ["price of MSFT"], checker=check, evaluator=judge)
    ((_, _, evidence),) = judge.seen
    assert evidence == "price (error): 'price' failed: KeyError: 'NOPE'\nprice: 410"


def test_a_run_that_raises_is_not_judged() -> None:
    judge = JudgeStandIn(passes=set(), seen=[])
    loops = {"down": react(lambda: ScriptedModel([RuntimeError("x")]))}
    result = compare(loops, TASKS[:1], checker=check, evaluator=judge)
    assert judge.seen == [] and result.attempts[0].verdict == ""


def test_parallel_attempts_give_the_same_totals_in_the_same_order() -> None:
    loops = {"direct": react(analyst), "stumbling": react(lambda: analyst(first_ticker="NOPE"))}
    serial = compare(loops, TASKS, checker=check, trials=2)
    parallel = compare(loops, TASKS, checker=check, trials=2, max_workers=2)
    key = [(a.loop, a.task, a.trial, a.model_calls, a.tool_errors) for a in serial.attempts]
    assert key == [
        (a.loop, a.task, a.trial, a.model_calls, a.tool_errors) for a in parallel.attempts
    ]
    for a, b in zip(serial.summaries(), parallel.summaries(), strict=True):
        assert (a.usage, a.tool_calls, a.successes) == (b.usage, b.tool_calls, b.successes)


@pytest.mark.parametrize("max_workers", [1, 2])
def test_on_attempt_reports_each_attempt_as_it_finishes(max_workers: int) -> None:
    import threading

    seen: list[tuple[str, str, int]] = []
    threads: set[int] = set()

    def progress(attempt: Any) -> None:
        seen.append((attempt.loop, attempt.task, attempt.trial))
        threads.add(threading.get_ident())

    loops = {"direct": react(analyst), "stumbling": react(lambda: analyst(first_ticker="NOPE"))}
    result = compare(
        loops, TASKS, checker=check, trials=2, max_workers=max_workers, on_attempt=progress
    )
    assert sorted(seen) == sorted((a.loop, a.task, a.trial) for a in result.attempts)
    assert len(seen) == 8
    assert threads == {threading.get_ident()}  # called from the caller's thread


class HandRolled:
    """A runner that is not one of the library's loops: only the duck-typed protocol."""

    def __init__(self, on_event: Any):
        self.on_event = on_event

    def run(self, task: str) -> Any:
        self.on_event(RunStarted(loop="mine", run_id="1"))
        outcome = ToolOutcome(content="oops", is_error=True)
        self.on_event(
            ToolCallFinished(loop="mine", run_id="1", call_id="c", name="t", outcome=outcome)
        )
        return SimpleNamespace(answer="190", usage=CALL, model_calls=1)


def test_any_runner_with_the_protocol_can_enter() -> None:
    result = compare({"mine": HandRolled}, TASKS[:1], checker=check)
    (attempt,) = result.attempts
    assert (attempt.stop_reason, attempt.success, attempt.recovered) == ("answered", True, True)
    assert (attempt.model_calls, attempt.tool_calls, attempt.tool_errors) == (1, 1, 1)


def test_a_factory_that_drops_the_sink_is_a_configuration_error() -> None:
    loops = {"deaf": lambda on_event: ReActLoop(ScriptedModel(["190"]), [price])}
    with pytest.raises(ConfigurationError, match="must pass on_event"):
        compare(loops, TASKS[:1], checker=check)


def test_a_factory_that_raises_propagates() -> None:
    def build(on_event: Any) -> Any:
        return ReActLoop(ScriptedModel([]), [price], max_steps=0, on_event=on_event)

    with pytest.raises(ConfigurationError, match="max_steps"):
        compare({"bad": build}, TASKS, checker=check)


@pytest.mark.parametrize(
    ("loops", "tasks", "options", "message"),
    [
        ({}, TASKS, {}, "need loops and tasks"),
        ({"a": react(analyst)}, [], {}, "need loops and tasks"),
        ({"a": react(analyst)}, TASKS, {"trials": 0}, "trials and max_workers"),
        ({"a": react(analyst)}, TASKS, {"max_workers": 0}, "trials and max_workers"),
    ],
)
def test_bad_arguments(loops: Any, tasks: Any, options: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        compare(loops, tasks, checker=check, **options)


def test_summary_of_an_unknown_loop() -> None:
    result = compare({"a": react(analyst)}, TASKS[:1], checker=check)
    with pytest.raises(ConfigurationError, match="no loop named 'b'"):
        result.summary("b")


def _two_loop_result() -> Comparison:
    judge = JudgeStandIn(passes={"999"}, seen=[])
    loops = {"direct": react(analyst), "wrong": react(lambda: ScriptedModel(["999"]))}
    return compare(loops, TASKS[:1], checker=check, trials=2, evaluator=judge)


def test_table_is_markdown_with_one_row_per_loop() -> None:
    lines = _two_loop_result().table().splitlines()
    assert lines[0].startswith("| loop | success |") and lines[0].count("|") == 14
    assert lines[1] == "|---" * 13 + "|"
    assert lines[2].startswith(
        "| direct | 100% (2/2) | 0 | - | 2.0 | 200 | 80 | 40 | 14 | 1.0 | 0 | - |"
    )
    assert lines[3].startswith("| wrong | 0% (0/2) | 0 | 2/2 | 1.0 | 0 | 0 | 0 | 0 | 0.0 | 0 | - |")
    assert "1 tasks x 2 trials per loop" in lines[5]


def test_csv_round_trip(tmp_path: Any) -> None:
    result = _two_loop_result()
    path = result.to_csv(tmp_path / "compare.csv")
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["loop"] for r in rows] == ["direct", "wrong"]
    for row, s in zip(rows, result.summaries(), strict=True):
        assert int(row["attempts"]) == s.attempts
        assert int(row["successes"]) == s.successes
        assert float(row["success_rate"]) == s.success_rate
        assert int(row["incorrect_acceptances"]) == s.incorrect_acceptances
        assert float(row["incorrect_acceptance_rate"]) == s.incorrect_acceptance_rate
        assert int(row["model_calls"]) == s.model_calls
        tokens = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
        assert Usage(**{k: int(row[k]) for k in tokens}) == s.usage
        assert int(row["tool_errors"]) == s.tool_errors
        assert float(row["seconds"]) == s.seconds


def test_chart_is_a_png(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    path = _two_loop_result().chart(tmp_path / "compare.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 5_000


def test_chart_without_matplotlib_names_the_extra(monkeypatch: Any, tmp_path: Any) -> None:
    result = _two_loop_result()
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'agentloops-kit\[chart\]'"):
        result.chart(tmp_path / "compare.png")
    assert not (tmp_path / "compare.png").exists()
