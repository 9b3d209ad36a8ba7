"""The tutorial's code is a real script (examples/tutorial_agent.py): run it so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "tutorial_agent.py"


def test_tutorial_script_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ok: the bookshop agent answered from its tools (offline, scripted model)"
    )


def test_tutorial_is_under_60_lines_and_the_page_shows_the_script_as_it_is() -> None:
    code = SCRIPT.read_text(encoding="utf-8")
    assert len(code.splitlines()) < 60
    page = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.DOTALL | re.MULTILINE)
    assert "--8<--" not in page  # an include shows as a raw line on a repository page
    whole = page.split("## The whole script", 1)[1]
    assert blocks[-1] in whole and blocks[-1] == code  # the whole script, exactly
    sections = [b for b in blocks if "build_agent(AnthropicModel())" not in b][:-1]
    assert len(sections) == 3
    for block in sections:  # each step's code is a piece of the script, in order
        assert block in code, block
    starts = [code.index(block) for block in sections]
    assert starts == sorted(starts)


def test_the_readme_quickstart_script_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "react_quickstart.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "answer: The two circles cover 19.635 m² together." in done.stdout
    assert "stop: answered, model calls: 2, tool calls: 2" in done.stdout
