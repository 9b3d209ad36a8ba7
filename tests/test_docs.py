"""The docs' code runs, and README's commands work as written after `make demo`.

Every ```python block of the listed pages runs, in order, per page, and their asserts
are the checks. Blocks fenced as ```py are illustrations that need something a test does
not have (an API key, a model or tools the page does not define) and are not run. The
tutorial's code is checked against examples/tutorial_agent.py, which
tests/test_tutorial.py runs. The async page's Starlette app is also served in process
and read back as server-sent events.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentloops
from agentloops import ReActLoop
from agentloops.testing import FunctionModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
RUNNABLE = [
    "async.md",
    "checkpoints.md",
    "compare.md",
    "context.md",
    "durability.md",
    "middleware.md",
    "models.md",
    "multi-agent.md",
    "operations.md",
    "plan-and-execute.md",
    "react.md",
    "rewoo.md",
    "streaming.md",
    "testing.md",
    "typed-output.md",
]
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


def run_page(page: str) -> dict[str, Any]:
    """Run every python block of `page` in order, in one namespace, and return it."""
    blocks = BLOCK.findall((DOCS / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} has no runnable python block"
    namespace: dict[str, Any] = {"__name__": f"docs.{page}"}
    for i, code in enumerate(blocks):
        # dont_inherit: a block runs as a user's script would, without this module's
        # `from __future__ import annotations` (pydantic resolves its models' hints then)
        exec(compile(code, f"{page} block {i + 1}", "exec", dont_inherit=True), namespace)
    return namespace


@pytest.mark.parametrize("page", RUNNABLE)
def test_python_blocks_run(page: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)  # blocks may write files (compare.csv)
    run_page(page)


def test_every_page_with_python_blocks_runs_them() -> None:
    """Every page's ```python blocks run, except on the pages listed here, whose blocks
    need names they do not define (the tutorial's run as examples/tutorial_agent.py)."""
    with_blocks = {p.name for p in DOCS.glob("*.md") if BLOCK.search(p.read_text("utf-8"))}
    not_run = {"human-in-the-loop.md", "providers.md", "scaling.md"}
    not_run |= {"tools.md", "tracing.md", "tutorial.md"}
    assert with_blocks - not_run == set(RUNNABLE)


@pytest.fixture(scope="module")
def async_page() -> dict[str, Any]:
    return run_page("async.md")


def sse_items(body: str) -> list[dict[str, Any]]:
    """The JSON of each `data:` line of a server-sent event stream."""
    chunks = [c for c in body.split("\n\n") if c]
    assert all(c.startswith("data: ") for c in chunks), chunks
    return [json.loads(c.removeprefix("data: ")) for c in chunks]


@pytest.mark.anyio
async def test_async_page_app_streams_a_run_as_server_sent_events(
    async_page: dict[str, Any],
) -> None:
    transport = httpx.ASGITransport(app=async_page["app"])
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/run", params={"task": "What is 4 + 5?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    items = sse_items(response.text)
    *events, result = items
    assert result == {"event": "result", "answer": "The sum is 9.", "stop_reason": "answered"}
    assert events[0]["event"] == "RunStarted" and events[-1]["event"] == "RunFinished"
    written = "".join(e["text"] for e in events if e["event"] == "TextDelta")
    assert written == "The sum is 9."
    calls = [e["args"] for e in events if e["event"] == "ToolCallStarted"]
    assert calls == [{"a": 4, "b": 5}]
    assert len({e["run_id"] for e in events}) == 1


@pytest.mark.anyio
async def test_async_page_app_ends_the_run_when_the_client_goes_away(
    async_page: dict[str, Any], monkeypatch: Any
) -> None:
    """As uvicorn serves it (ASGI spec 2.3: Starlette listens for the disconnect)."""
    calling, cancelled = asyncio.Event(), asyncio.Event()

    async def hangs(request: Any) -> Any:
        calling.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    monkeypatch.setitem(async_page, "agent", ReActLoop(FunctionModel(hangs), []))
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            sent.append({})
            return {"type": "http.request", "body": b"", "more_body": False}
        await calling.wait()  # the run is waiting for its model: the browser goes away
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/run",
        "raw_path": b"/run",
        "query_string": b"task=hello",
        "root_path": "",
        "headers": [],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await asyncio.wait_for(async_page["app"](scope, receive, send), 5)
    assert cancelled.is_set()  # the model call in flight was cancelled
    body = b"".join(m.get("body", b"") for m in sent if m.get("type") == "http.response.body")
    assert [e["event"] for e in sse_items(body.decode())] == ["RunStarted", "ModelCallStarted"]


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
    code = compile(blocks[0], "README quick start", "exec", dont_inherit=True)
    exec(code, {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "2 + 3 = 5 answered" in out
    assert out.count("2 + 3 = 5") == 3  # run, arun, and the streamed text
    assert "a=2 b=3 total=5" in out  # the typed answer


MARKDOWN = [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.name)
def test_install_lines_name_our_distribution(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    # `pip install agentloops` installs an unrelated project from the package index.
    wrong = re.findall(r"pip install ['\"]?agentloops(?![\w-])", text)
    assert wrong == [], page.name
    for version in re.findall(r"agentloops_kit-([\w.]+?)-py3", text):
        assert version == agentloops.__version__, page.name
