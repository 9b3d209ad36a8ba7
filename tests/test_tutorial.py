"""The tutorial's code is a real script (examples/tutorial_agent.py): run it so it cannot rot."""

from __future__ import annotations

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


def test_tutorial_is_under_60_lines_and_every_section_it_shows_exists() -> None:
    code = SCRIPT.read_text(encoding="utf-8").splitlines()
    assert len([line for line in code if "--8<--" not in line]) < 60
    page = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    for section in ("tools", "agent", "test"):
        assert f'--8<-- "examples/tutorial_agent.py:{section}"' in page
        assert f"# --8<-- [start:{section}]" in code
        assert f"# --8<-- [end:{section}]" in code


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
