"""The docs' code runs: every ```python block of the listed pages, in order, per page.

Blocks fenced as ```py are illustrations that need something a test does not have (an
API key, a module from another page's loop) and are not run. The tutorial's code is
included from examples/tutorial_agent.py, which tests/test_tutorial.py runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
RUNNABLE = ["compare.md", "durability.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("page", RUNNABLE)
def test_python_blocks_run(page: str, tmp_path: Path, monkeypatch: Any) -> None:
    blocks = BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} has no runnable python block"
    monkeypatch.chdir(tmp_path)  # blocks may write files (compare.csv)
    namespace: dict[str, Any] = {"__name__": f"docs.{page}"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page} block {i + 1}", "exec"), namespace)


def test_compare_page_shows_what_its_example_prints(tmp_path: Path, monkeypatch: Any) -> None:
    text = (DOCS / "compare.md").read_text(encoding="utf-8")
    printed: list[str] = []
    monkeypatch.chdir(tmp_path)
    exec(BLOCK.findall(text)[0], {"print": printed.append, "__name__": "docs"})
    shown = re.search(r"^```text\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert shown is not None
    rows = [line for line in printed[0].splitlines() if line.startswith("|")]
    expected = [line for line in shown.group(1).splitlines() if line.startswith("|")]
    assert len(rows) == len(expected) == 4
    for row, line in zip(rows, expected, strict=True):
        assert row.rsplit("|", 2)[0] == line.rsplit("|", 2)[0]  # all but the seconds
    assert (tmp_path / "compare.csv").exists()
