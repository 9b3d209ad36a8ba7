"""examples/compare_loops.py: the three loops on the Market Analyst tasks, offline."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

import compare_loops

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")


def test_compare_loops_writes_the_table_and_chart_and_says_how_it_measured(
    tmp_path: Path, capsys
) -> None:
    assert compare_loops.main(["--latency", "0", "--trials", "1", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "deterministic stand-in model" in out and "simulated tool latencies" in out
    for loop in ("| ReAct |", "| ReWOO |", "| Plan-and-Execute |"):
        assert loop in out
    assert (tmp_path / "img" / "compare.png").read_bytes().startswith(b"\x89PNG")
    results = (tmp_path / "compare_results.md").read_text()
    assert "deterministic stand-in" in results and "img/compare.png" in results


def test_every_loop_answers_every_task_right_with_the_stand_in() -> None:
    comparison = compare_loops.run(latency=0, trials=1)
    for summary in comparison.summaries():
        assert summary.attempts == len(compare_loops.TASKS) and summary.errors == 0
        assert summary.successes == summary.attempts, summary.loop
        assert summary.tool_errors > 0  # the unknown ticker: every look-up failed
    calls = {s.loop: s.model_calls for s in comparison.summaries()}
    assert calls["ReWOO"] == 2 * len(compare_loops.TASKS)  # planner + solver, however many tools
    assert calls["Plan-and-Execute"] > calls["ReAct"] > calls["ReWOO"]


@pytest.mark.parametrize(
    ("task", "answer", "right"),
    [
        ("Quick snapshot of NVDA", "NVDA last closed at 157.99 USD.", True),
        ("Quick snapshot of NVDA", "NVDA last closed at 158 USD.", False),
        ("Quick snapshot of XYZ", "No data: unknown ticker 'XYZ'.", True),
        ("Quick snapshot of XYZ", "XYZ trades at 12.5 USD.", False),
        ("Investment thesis and strategic risks for MSFT", "497.41, revenue 279.6", False),
        ("Investment thesis and strategic risks for MSFT", "497.41, 279.6; risks: ...", True),
    ],
)
def test_the_checker(task: str, answer: str, right: bool) -> None:
    assert compare_loops.checker(task, answer) is right
