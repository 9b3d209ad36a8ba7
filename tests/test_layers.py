"""The package's import graph: no circle anywhere, and the layers hold (with `lint-imports`,
which `make lint` runs; here too, so a plain pytest run sees a broken layer).

The graph is grimp's (import-linter's own), TYPE_CHECKING imports included; the circles are
found by the ReWOO scheduler's own cycle finder (tests/rewoo/test_scheduler.py tests it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from agentloops.rewoo._scheduler import cycles

ROOT = Path(__file__).resolve().parents[1]


def test_no_import_circle_in_the_package() -> None:
    graph = grimp.build_graph("agentloops", exclude_type_checking_imports=False)
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(imports) > 50  # the whole package was read
    assert cycles(imports) == []


def test_the_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "2 kept, 0 broken" in out.stdout
