"""The Market Analyst web app in a real browser: Debian's chromium driven by Playwright,
against the app served by uvicorn on a free loopback port in a thread of this process.

Skipped only when chromium is not installed (`.ci/run` installs it). Playwright never
downloads a browser here: it is pointed at /usr/bin/chromium. Set
`AGENTLOOPS_SCREENSHOT=docs/img/market-analyst-web.png` to write the screenshot the
deep-run test takes into the docs as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _analyst_app import Worker, serving
from market_analyst import flags, models, tools
from market_analyst.demo_model import DemoModel
from market_analyst.roles import role_of
from market_analyst.store import AnalystStore
from market_analyst.web.app import create_app
from market_analyst.workflow import Analyst
from playwright.sync_api import Browser, Page, expect, sync_playwright

from agentloops import ModelError, ModelRequest, ModelResponse
from agentloops.events import Delta
from agentloops.testing import FunctionModel, deltas

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LATENCY = 0.3  # the tools' simulated latency, scaled down: overlap stays real, runs stay short
SCREENSHOT_ENV = "AGENTLOOPS_SCREENSHOT"
HOSTILE = (
    "Quick snapshot of NVDA <script>window.__xss=1</script> <img src=x onerror=window.__xss=2>"
)

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="chromium is not installed (apt-get install -y chromium; .ci/run does it)",
    ),
    pytest.mark.slow,
]
# Assertions wait as long as the pages' own actions (`set_default_timeout` below): the 5 s
# default failed a deep run's "pending" on a loaded 2-core machine, not on a slow page.
expect.set_options(timeout=20_000)


class HeldWriter:
    """The offline model, streamed in pieces of 16 characters, except that the one writing
    the report (the ReWOO solver) stops after its fourth piece while `release` is clear: a
    test can look at the page in the middle of a run, with the report's first words on it.
    It waits off the event loop."""

    def __init__(self) -> None:
        self.demo = DemoModel()
        self.release = threading.Event()
        self.release.set()
        self.model = self

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self.demo.complete(request)

    async def acomplete(self, request: ModelRequest) -> ModelResponse:
        return await self.demo.acomplete(request)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Delta | ModelResponse]:
        response = await self.demo.acomplete(request)
        for i, delta in enumerate(deltas(response, 16)):
            if i == 4 and role_of(request) == "solver":
                await asyncio.to_thread(self.release.wait, 30)
            yield delta
        yield response


@dataclass
class Served:
    url: str
    store: AnalystStore
    model: HeldWriter


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    held = HeldWriter()
    settings = models.ModelSettings(provider="offline")
    clients = models.Clients(held.model, held.model, held.model, settings)
    tools.configure(latency_scale=LATENCY, ledger_path=tmp_path / "ledger.jsonl")
    try:
        with serving(create_app(store, clients, user="tester")) as url:
            yield Served(url, store, held)
    finally:
        held.release.set()
        tools.configure(latency_scale=1.0, ledger_path=Path("ledger.jsonl"))


@contextlib.contextmanager
def _tabs(browser: Browser, count: int = 1, width: int = 1360) -> Iterator[list[Page]]:
    """`count` tabs of one browser window; no script error may happen in any of them, and
    nothing the page does may break its Content-Security-Policy."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(20_000)
    errors: list[str] = []
    pages = [context.new_page() for _ in range(count)]
    for page in pages:
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda message: _refused(message.text, errors))
    try:
        yield pages
    finally:
        context.close()
    assert errors == []


def _refused(text: str, errors: list[str]) -> None:
    if "Content Security Policy" in text:
        errors.append(text)


def _open(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def _ask(page: Page, request: str) -> None:
    page.fill("#request", request)
    page.click("#run-button")
    expect(page.locator("#run-id")).to_have_text(re.compile(r"ma-[0-9a-f]{8}"))


def _calls(page: Page) -> list[tuple[str, float, float]]:
    """The time line's calls: (tool, start, finish) as the page drew them."""
    rows = page.locator("#timeline .tl-row").evaluate_all(
        "rows => rows.map(r => [r.dataset.name, r.dataset.start, r.dataset.end])"
    )
    return [(name, float(start), float(end)) for name, start, end in rows]


def _pending_run(served: Served, request: str) -> str:
    """A run taken to its approval pause before the test, in this process (as the command
    line would), without the tools' latency."""
    tools.configure(latency_scale=0)
    try:
        run_id = f"ma-seed{len(served.store.run_ids()):03d}"
        Analyst(DemoModel(), served.store).run(request, run_id, model="offline")
    finally:
        tools.configure(latency_scale=LATENCY)
    return run_id


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1000 and height >= 800 and len(data) > 20_000


def test_a_flash_run_streams_and_shows_overlapping_tool_calls(browser, served) -> None:
    served.model.release.clear()  # the report's writer waits: the page is seen mid-run
    with _tabs(browser) as [page]:
        _open(page, served.url)
        _ask(page, HOSTILE)
        expect(page.locator("#run-status")).to_have_text("running")
        expect(page.locator("#route")).to_contain_text("flash_briefing")
        expect(page.locator("#route .loop")).to_have_text("ReWOO")
        expect(page.locator("#plan tr")).to_have_count(3)
        done = page.locator("#timeline .tl-row[data-end]")
        expect(done).to_have_count(3)  # every call finished, and still no draft: live
        expect(page.locator("#draft")).to_have_class("markdown muted")
        assert int(page.locator("#tokens dd").first.inner_text().replace(",", "")) > 0
        calls = _calls(page)
        assert {name for name, _, _ in calls} == {
            "get_stock_snapshot",
            "get_price_history",
            "search_news",
        }
        overlapping = [
            (a, b)
            for i, a in enumerate(calls)
            for b in calls[i + 1 :]
            if a[1] < b[2] and b[1] < a[2]  # each started before the other finished
        ]
        assert overlapping, calls

        served.model.release.set()
        expect(page.locator("#run-status")).to_have_text("pending")
        expect(page.locator("#verdict")).to_have_text("pass")
        expect(page.locator("#draft h2")).to_contain_text("NVDA")
        # the request is text: shown as typed, never run or parsed as HTML
        expect(page.locator("#run-request")).to_have_text(HOSTILE)
        assert page.evaluate("window.__xss") is None
        assert page.locator("#run script, #run img").count() == 0


def test_the_page_shows_who_is_thinking_and_what_the_model_writes_as_it_writes(
    browser, served
) -> None:
    served.model.release.clear()  # the solver stops after its first four pieces
    with _tabs(browser) as [page]:
        _open(page, served.url)
        _ask(page, "Quick snapshot of NVDA")
        live = page.locator("#model-live")
        expect(page.locator("#thinking-role")).to_have_text("ReWOO solver")
        expect(page.locator("#thinking-state")).to_have_text("is writing…")
        expect(live).to_have_class(re.compile(r"\bactive\b"))  # the pulse: still writing
        expect(page.locator("#model-text")).to_have_text(re.compile(r'^\{"'))
        written = page.locator("#model-text").inner_text()
        assert len(written) == 4 * 16, written  # exactly what was written so far
        expect(page.locator("#draft")).to_have_class("markdown muted")  # no draft yet

        served.model.release.set()
        expect(page.locator("#thinking-role")).to_have_text("evaluator")  # the next call
        expect(page.locator("#run-status")).to_have_text("pending")
        expect(live).to_be_hidden()  # the run is over: the draft and verdict say the rest
        expect(page.locator("#verdict")).to_have_text("pass")


def test_a_deep_run_pauses_is_approved_with_an_edit_and_is_archived(
    browser, served, tmp_path: Path
) -> None:
    earlier = _pending_run(served, "Quick snapshot of NVDA")
    served.store.decide(earlier, True, by="alice", via="--approve")
    with _tabs(browser) as [page]:
        _open(page, served.url)
        _ask(page, "Investment thesis and strategic risks for MSFT")
        expect(page.locator("#run-status")).to_have_text("pending")  # paused for a person
        expect(page.locator("#route")).to_contain_text("deep_research")
        expect(page.locator("#route .loop")).to_have_text("Plan-and-Execute")
        expect(page.locator("#plan tr.done")).to_have_count(4)
        expect(page.locator("#verdict")).to_have_text("pass")
        expect(page.locator("#pending li")).to_contain_text(["Investment thesis"])
        assert len(_calls(page)) >= 4
        tokens = page.locator("#tokens dd").all_inner_texts()
        assert len(tokens) == 4 and all(int(t.replace(",", "")) > 0 for t in tokens), tokens

        shot = tmp_path / "market-analyst-web.png"
        page.screenshot(path=str(shot), full_page=True)
        _check_png(shot)
        if os.environ.get(SCREENSHOT_ENV):
            target = Path(os.environ[SCREENSHOT_ENV])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, target)

        page.click("#edit")
        editor = page.locator("#edit-text")
        draft = editor.input_value()
        assert draft.startswith("## ") and "### Risks" in draft
        edited = draft.replace(
            "### Risks\n\n", "### Risks\n\n- A cloud price war (added in review).\n"
        )
        editor.fill(edited)
        page.click("#publish-edit")
        expect(page.locator("#decision")).to_contain_text("Published")
        expect(page.locator("#run-status")).to_have_text("published")
        expect(page.locator("#decide")).to_be_hidden()

        page.fill("#q", "cloud price war")
        page.click("#search button")
        hit = page.locator("#reports li a")
        expect(hit).to_have_count(1)
        expect(hit).to_contain_text("MSFT")
        hit.click()
        expect(page.locator("#report-body")).to_contain_text("A cloud price war (added in review).")
        expect(page.locator("#report-meta")).to_contain_text("approved by tester")

    [run_id] = [r for r in served.store.run_ids() if r != earlier]
    decision = served.store.get(run_id)["decision"]
    assert decision["edited"] == edited and decision["via"] == "web, edited"


def test_a_second_tab_approving_the_same_run_is_refused(browser, served) -> None:
    run_id = _pending_run(served, "Quick snapshot of AMD")
    with _tabs(browser, 2) as [first, second]:
        for page in (first, second):
            _open(page, f"{served.url}#run={run_id}")
            expect(page.locator("#approve")).to_be_visible()
        first.bring_to_front()  # a person switches tabs (a background tab gets no frames)
        first.click("#approve")
        expect(first.locator("#decision")).to_contain_text(f"Published {run_id}")
        second.bring_to_front()
        second.click("#approve")
        refusal = second.locator("#decision")
        expect(refusal).to_contain_text(f"Run {run_id} was already published by tester (web)")
        expect(refusal).to_contain_text("your approval changed nothing")
        expect(refusal).to_have_class("message error refused")
        expect(second.locator("#run-status")).to_have_text("published")
        expect(second.locator("#decide")).to_be_hidden()
    assert served.store.decide(run_id, False, by="x", via="test")[1] is False


def test_a_trade_after_publishing_waits_and_a_second_tab_cannot_approve_it_again(
    browser, served
) -> None:
    run_id = _pending_run(served, "Quick snapshot of GOOGL")  # the stand-in recommends buy
    with _tabs(browser, 2) as [first, second]:
        _open(first, f"{served.url}#run={run_id}")
        first.click("#approve")
        expect(first.locator("#run-status")).to_have_text("published")
        expect(first.locator("#trade-why")).to_contain_text("recommends BUY")
        first.fill("#trade-budget", "5000")  # 28 shares, 4,934.44 USD: above 1,000
        first.click("#propose-trade")
        expect(first.locator("#trade-status")).to_have_text("waiting")
        expect(first.locator("#trade-summary")).to_contain_text("buy 28 GOOGL")
        expect(first.locator("#trade-decide")).to_be_visible()
        expect(first.locator("#trades li")).to_contain_text(["buy 28 GOOGL"])

        _open(second, f"{served.url}#run={run_id}")
        expect(second.locator("#trade-decide")).to_be_visible()
        first.bring_to_front()
        first.click("#approve-trade")
        expect(first.locator("#trade-status")).to_have_text("executed")
        expect(first.locator("#trade-ledger")).to_contain_text("approved by tester (web)")
        second.bring_to_front()
        second.click("#approve-trade")
        refusal = second.locator("#trade-message")
        expect(refusal).to_contain_text("was already decided by tester (web)")
        expect(refusal).to_contain_text("Your approval was refused")
        expect(second.locator("#trade-status")).to_have_text("executed")
        expect(second.locator("#trade-decide")).to_be_hidden()
    [entry] = tools.ledger_entries(served.store.ledger_path)
    assert (entry["ticker"], entry["quantity"], entry["approved_by"]) == ("GOOGL", 28, "tester")


def test_a_run_another_process_holds_shows_who_and_its_approval_waits_for_the_lease(
    browser, served, tmp_path: Path
) -> None:
    run_id = _pending_run(served, "Quick snapshot of AMD")
    holder = Worker("hold", tmp_path / ".agentloops", run_id, 2.0)  # a lease of two seconds
    try:
        held = holder.read()["held"]
        with _tabs(browser) as [page]:
            _open(page, f"{served.url}#run={run_id}")
            expect(page.locator("#run-error")).to_contain_text(f"Held by {held} until")
            page.click("#approve")
            refusal = page.locator("#decision")
            expect(refusal).to_contain_text(f"{run_id} is held by {held} until")
            expect(refusal).to_contain_text("another process is working on it")
            expect(page.locator("#run-status")).to_have_text("pending")
            holder.kill()  # it crashed: its lease lapses two seconds later
            deadline = time.monotonic() + 10
            while served.store.runs.run_info(run_id).leased:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            page.click("#approve")
            expect(page.locator("#decision")).to_contain_text(f"Published {run_id}")
    finally:
        holder.kill()


def test_the_page_s_policy_blocks_an_injected_script_and_style(browser, served) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        refused: list[str] = []
        page.on("console", lambda message: _refused(message.text, refused))
        _open(page, served.url)
        page.evaluate(
            """() => {
                const script = document.createElement("script");
                script.textContent = "window.__ran = 1";
                document.body.append(script);
                const styled = document.createElement("div");
                styled.setAttribute("style", "color: red");
                document.body.append(styled);
            }"""
        )
        assert page.evaluate("window.__ran") is None
        deadline = time.monotonic() + 5  # the console reports come after the script returns
        while len(refused) < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        assert len(refused) == 2, refused
        assert "script-src 'self'" in refused[0] and "style-src 'self'" in refused[1]
    finally:
        context.close()


PHONE = 420  # CSS pixels: a phone held upright


def _fits(page: Page) -> None:
    """Nothing on the page is wider than the phone: no sideways scrolling."""
    widest = page.evaluate("document.documentElement.scrollWidth")
    assert widest <= PHONE, f"the page is {widest} px wide at {PHONE}"


def test_the_page_works_at_a_phone_s_width(browser, served) -> None:
    with _tabs(browser, width=PHONE) as [page]:
        _open(page, served.url)
        _fits(page)
        request = page.locator("#request").bounding_box()
        assert request is not None and request["width"] >= PHONE * 0.7, request
        for control in ("#mode", "#run-button"):
            box = page.locator(control).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE
        _ask(page, "Investment thesis and strategic risks for MSFT")
        expect(page.locator("#run-status")).to_have_text("pending")
        expect(page.locator("#verdict")).to_have_text("pass")
        _fits(page)
        tracks = page.locator("#timeline .tl-track").evaluate_all(
            "tracks => tracks.map(t => t.getBoundingClientRect().width)"
        )
        assert len(tracks) >= 4 and min(tracks) >= PHONE / 3, tracks  # the bars have room
        for button in ("#approve", "#edit", "#reject"):
            box = page.locator(button).bounding_box()
            assert box is not None and box["x"] + box["width"] <= PHONE, button


def test_a_stopped_run_says_how_to_continue_it_with_a_command_that_works(browser, served) -> None:
    demo = DemoModel()

    def writer_fails(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "solver":
            raise ModelError("the server went away")
        return demo.complete(request)

    tools.configure(latency_scale=0)
    with pytest.raises(ModelError):
        Analyst(FunctionModel(writer_fails), served.store).run("Quick snapshot of AMD", "ma-stop")
    tools.configure(latency_scale=LATENCY)
    with _tabs(browser) as [page]:
        _open(page, f"{served.url}#run=ma-stop")
        expect(page.locator("#run-status")).to_have_text("stopped")
        expect(page.locator("#run-error")).to_contain_text(
            f"Continue it with: {flags.command('--resume', 'ma-stop')}"
        )
