"""examples/compare_loops.py: the three loops on the Market Analyst tasks, offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import compare_loops
import pytest

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")
FAST = ["--latency", "0", "--trials", "1"]


def test_compare_loops_writes_the_table_and_chart_and_says_how_it_measured(
    tmp_path: Path, capsys
) -> None:
    pytest.importorskip("matplotlib")
    assert compare_loops.main([*FAST, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "deterministic stand-in model" in out and "simulated tool latencies" in out
    for loop in ("| ReAct |", "| ReWOO |", "| Plan-and-Execute |"):
        assert loop in out
    assert (tmp_path / "img" / "compare.png").read_bytes().startswith(b"\x89PNG")
    results = (tmp_path / "compare_results.md").read_text()
    assert "deterministic stand-in" in results and "img/compare.png" in results


def test_progress_is_printed_as_each_attempt_finishes(tmp_path: Path, capsys) -> None:
    assert compare_loops.main([*FAST, "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    total = len(compare_loops.LOOPS) * len(compare_loops.TASKS)
    progress = [line for line in lines if line.startswith("[")]
    assert [line.split("]")[0] for line in progress] == [f"[{i:>2}/{total}" for i in range(1, 13)]
    assert lines.index(progress[-1]) < lines.index(next(x for x in lines if x.startswith("| loop")))
    assert "ReWOO" in progress[1] and "right, 2 model calls" in progress[1]


def test_the_default_output_folder_is_compare_out(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert compare_loops.main(FAST) == 0
    assert (tmp_path / "compare-out" / "compare_results.md").exists()


def test_without_matplotlib_the_table_is_still_written(tmp_path: Path, monkeypatch, capsys) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert compare_loops.main([*FAST, "--out", str(tmp_path)]) == 0
    assert "No chart: " in capsys.readouterr().out
    results = (tmp_path / "compare_results.md").read_text()
    assert "| ReWOO |" in results and "compare.png" not in results
    assert not (tmp_path / "img" / "compare.png").exists()


def test_files_git_tracks_are_never_overwritten(tmp_path: Path, capsys) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "compare_results.md").write_text("kept\n")
    subprocess.run(["git", "add", "compare_results.md"], cwd=tmp_path, check=True)
    assert compare_loops.main([*FAST, "--out", str(tmp_path)]) == 2
    assert "Not overwriting files git tracks" in capsys.readouterr().err
    assert (tmp_path / "compare_results.md").read_text() == "kept\n"
    assert compare_loops.tracked([tmp_path / "img" / "compare.png"]) == []  # absent: not tracked
    (tmp_path / "other").mkdir()
    assert compare_loops.main([*FAST, "--out", str(tmp_path / "other")]) == 0  # untracked: fine


def test_outside_a_git_work_tree_nothing_is_tracked(tmp_path: Path) -> None:
    (tmp_path / "compare_results.md").write_text("old\n")
    assert compare_loops.tracked([tmp_path / "compare_results.md"]) == []


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
