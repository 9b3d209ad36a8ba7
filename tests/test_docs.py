"""The docs' code runs, and README's commands work as written after `make demo`.

Every ```python block of the listed pages runs, in order, per page. Blocks fenced as
```py are illustrations that need something a test does not have (an API key, a module
from another page's loop) and are not run. The tutorial's code is checked against
examples/tutorial_agent.py, which tests/test_tutorial.py runs.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentloops

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RUNNABLE = ["checkpoints.md", "compare.md", "durability.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
SHELL = re.compile(r"^```(?:sh|bash)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
COMMANDS = ("make", ".venv/bin/python", ".venv/bin/pip", "export", "ollama")
"""What a README command may start with: a make target or the .venv that `make demo`
builds (the system python lacks the examples' dependencies), or a setting or a
third-party tool's command."""


def readme_commands() -> list[str]:
    """README's shell commands, one per entry: comments dropped, continuations joined."""
    text = "\n".join(SHELL.findall(README.read_text(encoding="utf-8")))
    text = text.replace("\\\n", " ")
    lines = (line.split(" # ")[0].split("\t#")[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))


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


def test_readme_commands_use_make_or_the_demo_venv() -> None:
    commands = readme_commands()
    assert len(commands) >= 10
    for command in commands:
        assert command.split()[0] in COMMANDS, command


def test_readme_make_targets_exist() -> None:
    named = {c.split()[1] for c in readme_commands() if c.startswith("make ")}
    assert named >= {"demo", "test"}
    assert named <= make_targets()
    docs = re.findall(r"`make (\w+)`", README.read_text(encoding="utf-8"))
    assert set(docs) <= make_targets()


def test_readme_scripts_exist_and_take_the_options_shown() -> None:
    scripts = [c for c in readme_commands() if c.startswith(".venv/bin/python examples/")]
    assert len(scripts) >= 6
    for command in scripts:
        script, *args = shlex.split(command)[1:]
        assert (ROOT / script).is_file(), script
        usage = subprocess.run(
            [sys.executable, str(ROOT / script), "--help"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            timeout=60,
        ).stdout
        for option in (a.split("=")[0] for a in args if a.startswith("--")):
            assert option in usage, f"{script} has no {option}"


def test_readme_quick_start_runs(capsys: Any) -> None:
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    exec(compile(blocks[0], "README quick start", "exec"), {"__name__": "readme"})
    assert "2 + 3 = 5 answered" in capsys.readouterr().out


MARKDOWN = [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.name)
def test_install_lines_name_our_distribution(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # `pip install agentloops` installs an unrelated project from the package index.
    wrong = re.findall(r"pip install ['\"]?agentloops(?![\w-])", text)
    assert wrong == [], page.name
    for version in re.findall(r"agentloops_kit-([\w.]+?)-py3", text):
        assert version == agentloops.__version__, page.name
