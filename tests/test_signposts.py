"""The package's signposts stay true: each folder's README lists exactly its files, and
every module opens with a docstring that ends on its rule (what it must not know)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "agentloops"
FOLDERS = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))
MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_each_folder_has_a_readme_listing_its_files(folder: Path) -> None:
    readme = (folder / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- `([^`]+)`:", readme, re.MULTILINE))
    files = {p.name for p in folder.iterdir() if p.suffix == ".py" or p.name == "py.typed"}
    files |= {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert listed == files


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_module_says_what_lives_there_and_its_rule(module: Path) -> None:
    doc = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8")))
    assert doc, "no opening docstring"
    assert "Rule:" in doc or "Rule 1" in doc, "no rule: say what this module must not know"
