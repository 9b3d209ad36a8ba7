"""The distribution: its name, version and dependencies as built, and a core without SDKs.

The wheel is built here with hatchling's build hook (no network, no isolation), so what
is checked is what `pip wheel .` or `python -m build` would produce.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import agentloops

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    code = f"from hatchling.build import build_wheel; print(build_wheel({str(out)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return out / done.stdout.strip().splitlines()[-1]


def metadata(wheel: Path) -> tuple[list[str], dict[str, list[str]]]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        parsed = Parser().parsestr(archive.read(info).decode())
    fields: dict[str, list[str]] = {}
    for key, value in parsed.items():
        fields.setdefault(key, []).append(value)
    return names, fields


def test_the_wheel_is_agentloops_kit_at_the_package_version(wheel: Path) -> None:
    names, fields = metadata(wheel)
    assert wheel.name == f"agentloops_kit-{agentloops.__version__}-py3-none-any.whl"
    assert fields["Name"] == ["agentloops-kit"]
    assert fields["Version"] == [agentloops.__version__]
    assert "agentloops/py.typed" in names
    assert "agentloops/__init__.py" in names
    assert not [n for n in names if n.startswith(("tests/", "examples/", "docs/", "bench/"))]


def test_the_core_needs_pydantic_and_httpx_only_and_sdks_are_extras(wheel: Path) -> None:
    _, fields = metadata(wheel)
    requires = fields["Requires-Dist"]
    core = sorted(project(r) for r in requires if "extra ==" not in r)
    assert core == ["httpx", "pydantic"]

    def extra(name: str) -> list[str]:
        return [project(r) for r in requires if f"extra == '{name}'" in r]

    assert extra("anthropic") == ["anthropic"]
    assert extra("sse") == ["httpx-sse"]
    # `openai`, the old name of `sse` (it never installed the OpenAI SDK), installs the same
    # (hatchling writes the self-reference out as the packages themselves)
    assert extra("openai") == ["httpx-sse"]
    assert extra("mcp") == ["mcp"]
    assert {"anthropic", "sse", "openai", "examples", "chart", "dev"} <= set(
        fields["Provides-Extra"]
    )


def test_the_wheel_carries_the_mit_license(wheel: Path) -> None:
    names, fields = metadata(wheel)
    assert fields["License-Expression"] == ["MIT"]
    [carried] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(carried).decode()
    assert text == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert (
        text.startswith("MIT License\n") and "Permission is hereby granted, free of charge" in text
    )


def test_the_docs_extras_table_names_every_extra_and_what_it_installs(wheel: Path) -> None:
    _, fields = metadata(wheel)
    page = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = page[page.index("| extra | adds | for |") :].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    documented = {name for cells in rows for name in re.findall(r"`([\w-]+)`", cells[0])}
    assert documented == set(fields["Provides-Extra"])
    for cells in rows:
        names = re.findall(r"`([\w-]+)`", cells[0])
        if len(names) != 1:
            continue  # dev, docs, bench: one row for working on agentloops itself
        [name] = names
        wanted = {
            project(r)
            for r in fields["Requires-Dist"]
            if f"extra == '{name}'" in r and not r.startswith("agentloops-kit")
        }
        adds = cells[1].lower().replace("_", "-")
        assert all(w.lower() in adds for w in wanted), (name, wanted, cells[1])


def project(requirement: str) -> str:
    """`"httpx<1,>=0.27"` -> `"httpx"`."""
    return re.split(r"[^A-Za-z0-9._-]", requirement, maxsplit=1)[0]


SDK_FREE = """
import sys
for name in ("anthropic", "httpx2", "httpcore2", "httpx_sse"):
    sys.modules[name] = None  # as if not installed: importing one raises ImportError

import httpx

import agentloops
from agentloops import OpenAICompatModel, ReActLoop, tool
from agentloops.testing import ScriptedModel, use_tools


@tool
def add(a: int, b: int) -> int:
    "Add two integers."
    return a + b


model = ScriptedModel([use_tools(("add", {"a": 2, "b": 3})), "5"])
print("react:", ReActLoop(model, [add]).run("2 + 3?").answer)


def server(request):
    reply = {"role": "assistant", "content": "hello"}
    body = {"model": "m", "choices": [{"message": reply, "finish_reason": "stop"}]}
    return httpx.Response(200, json=body)


client = httpx.Client(transport=httpx.MockTransport(server))
openai = OpenAICompatModel("http://127.0.0.1:9/v1", "m", http_client=client)
print("openai:", ReActLoop(openai, [add]).run("hi").answer)
try:
    agentloops.AnthropicModel()
except Exception as exc:
    print("anthropic:", type(exc).__name__, exc)
"""


def test_the_core_works_without_the_provider_sdks() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_FREE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["react: 5", "openai: hello"]
    assert lines[2].startswith("anthropic: ") and "anthropic" in lines[2][len("anthropic: ") :]
