"""The Market Analyst web app without a browser: its JSON API and event stream (Starlette's
TestClient), the analyst on the asyncio driver, and the command line and the web app
deciding runs in one store from two processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from _analyst_app import make_app
from market_analyst import cli, flags, models, tools
from market_analyst.demo_model import DemoModel
from market_analyst.roles import role_of
from market_analyst.store import AnalystStore
from market_analyst.web import serve, views
from market_analyst.web.app import MAX_REQUEST_CHARS, create_app
from market_analyst.workflow import Analyst
from starlette.testclient import TestClient

from agentloops import TextDelta
from agentloops.testing import deltas

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOSTILE = "Quick snapshot of NVDA <script>window.__xss=1</script>\n# Heading"

pytestmark = pytest.mark.usefixtures("instant_analyst_tools")


@dataclass
class Web:
    client: TestClient
    store: AnalystStore

    def start(self, request: str, mode: str = "auto") -> str:
        response = self.client.post("/api/runs", json={"request": request, "mode": mode})
        assert response.status_code == 202, response.text
        run_id: str = response.json()["run_id"]
        return run_id

    def feed(self, run_id: str, last_id: int | None = None) -> list[dict[str, Any]]:
        """The run's server-sent events (the stream ends with the run)."""
        headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
        response = self.client.get(f"/api/runs/{run_id}/events", headers=headers)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        items = []
        for block in response.text.strip().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines())
            items.append({"id": int(fields["id"]), **json.loads(fields["data"])})
        return items

    def finish(self, request: str, mode: str = "auto") -> str:
        run_id = self.start(request, mode)
        assert self.feed(run_id)[-1]["kind"] == "end"
        return run_id

    def decide(self, run_id: str, action: str, **body: Any) -> httpx.Response:
        return self.client.post(
            f"/api/runs/{run_id}/decision", json={"action": action, "by": "alice", **body}
        )


def _offline() -> models.Clients:
    return models.build(models.ModelSettings(provider="offline"))


@pytest.fixture
def web(tmp_path: Path):
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    app = create_app(store, _offline(), user="tester")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield Web(client, store)


# -- a run, live ------------------------------------------------------------------------


def test_a_flash_run_streams_route_plan_tool_calls_tokens_draft_and_verdict(web) -> None:
    run_id = web.start("Quick snapshot of NVDA")
    items = web.feed(run_id)
    assert [i["id"] for i in items] == list(range(len(items)))
    kinds = [i["kind"] for i in items]
    stages = [i["stage"] for i in items if i["kind"] == "stage"]
    assert stages == ["route", "draft", "verdict"]
    assert kinds.index("plan") < kinds.index("tool") and kinds[-1] == "end"
    assert items[-1]["status"] == "pending" and items[-1]["error"] is None
    route = next(i for i in items if i.get("stage") == "route")
    assert route["route"] == "flash_briefing" and "quick" in route["route_reasoning"]
    plan = next(i for i in items if i["kind"] == "plan")
    assert plan["loop"] == "rewoo" and [s["id"] for s in plan["steps"]] == ["#E1", "#E2", "#E3"]
    calls: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        if item["kind"] == "tool":
            calls.setdefault(item["key"], []).append(item)
    assert len(calls) == 3
    for start, end in calls.values():  # each call: its start, then its finish
        assert (start["phase"], end["phase"]) == ("start", "end")
        assert start["t"] <= end["t"] and not end["error"] and "NVDA" in end["preview"]
        assert start["args"]["ticker"] == "NVDA"
    models_used = [i for i in items if i["kind"] == "model"]
    assert {i["loop"] for i in models_used} >= {"router", "rewoo", "evaluator"}
    assert all(set(i["usage"]) >= {"input_tokens", "cache_read_tokens"} for i in models_used)
    draft = next(i for i in items if i.get("stage") == "draft")
    assert draft["draft"].startswith("## ") and "<h2>" in draft["draft_html"]
    verdict = next(i for i in items if i.get("stage") == "verdict")
    assert verdict["verdict"]["verdict"] == "pass"

    record = web.client.get(f"/api/runs/{run_id}").json()
    assert record["status"] == "pending" and record["live"] and not record["running_here"]
    assert record["loop"] == "ReWOO" and record["draft"] == draft["draft"]
    total = sum(i["usage"]["output_tokens"] for i in models_used)
    assert record["usage"]["output_tokens"] == total > 0
    assert record["evidence"][0]["name"] == "get_stock_snapshot"
    assert record["model"] == "offline-demo (deterministic stand-in)"


def test_a_deep_run_streams_its_plan_steps_and_each_step_s_tool_calls(web) -> None:
    items = web.feed(web.start("Tell me about MSFT"))  # unclear: deep
    plan = next(i for i in items if i["kind"] == "plan")
    assert plan["loop"] == "plan_execute" and len(plan["steps"]) == 4
    steps = [(i["phase"], i["id"]) for i in items if i["kind"] == "step"]
    assert steps[:2] == [("start", "1"), ("end", "1")] and len(steps) == 8
    tool_steps = [i["step"] for i in items if i["kind"] == "tool"]
    assert tool_steps and set(tool_steps) == {"1", "2", "3", "4"}
    assert items[-1] == {**items[-1], "kind": "end", "status": "pending"}


def test_a_reader_that_reconnects_gets_what_it_missed_and_the_end_again(web) -> None:
    run_id = web.start("Quick snapshot of AMD")
    items = web.feed(run_id)
    assert web.feed(run_id, last_id=3) == items[4:]
    assert web.feed(run_id, last_id=items[-1]["id"]) == items[-1:]  # not a stream for ever


def test_runs_waiting_are_listed_newest_first(web) -> None:
    first = web.finish("Quick snapshot of NVDA")
    second = web.finish("Quick snapshot of AMD")
    listed = web.client.get("/api/runs").json()
    assert [r["run_id"] for r in listed["pending"]] == [second, first]
    assert listed["pending"][0]["request"] == "Quick snapshot of AMD"
    assert listed["pending"][0]["verdict"] == "pass" and listed["running"] == []


# -- deciding ----------------------------------------------------------------------------


def test_approve_publishes_once_and_a_second_approval_is_refused_naming_the_first(web) -> None:
    run_id = web.finish("Quick snapshot of NVDA")
    first = web.decide(run_id, "approve")
    assert first.status_code == 200
    assert first.json()["message"].startswith(f"Published {run_id}")
    assert first.json()["run"]["status"] == "published"
    second = web.client.post(f"/api/runs/{run_id}/decision", json={"action": "reject", "by": "bob"})
    assert second.status_code == 409
    error = second.json()["error"]
    assert "already published by alice (web)" in error and "your rejection changed nothing" in error
    assert second.json()["run"]["status"] == "published"
    assert len(web.store.archive.recent()) == 1
    assert web.client.get("/api/runs").json()["pending"] == []


def test_approve_with_an_edit_publishes_the_edit_and_keeps_the_draft(web) -> None:
    run_id = web.finish("Quick snapshot of NVDA")
    draft = web.store.get(run_id)["draft"]
    edited = draft + "\nThe approver adds: watch the export rules closely.\n"
    response = web.decide(run_id, "edit", markdown=edited)
    assert response.status_code == 200 and response.json()["notes"] == []
    record = web.store.get(run_id)
    assert record["draft"] == draft and record["decision"]["edited"] == edited
    assert record["decision"]["via"] == "web, edited" and record["decision"]["by"] == "alice"
    [hit] = web.client.get("/api/reports", params={"q": "approver adds"}).json()["reports"]
    assert hit["run_id"] == run_id and "«adds»" in hit["snippet"]
    report = web.client.get(f"/api/reports/{run_id}").json()
    assert "edited by the approver" in report["markdown"] and "approver adds" in report["html"]


def test_an_edit_with_invented_figures_is_published_with_a_note(web) -> None:
    run_id = web.finish("Quick snapshot of NVDA")
    draft = web.store.get(run_id)["draft"]
    response = web.decide(run_id, "edit", markdown=draft + "\nTarget price 999.99.\n")
    assert response.status_code == 200
    [note] = response.json()["notes"]
    assert "999.99" in note and "published as you wrote it" in note


def test_an_unchanged_edit_is_a_plain_approval_and_an_empty_one_is_refused(web) -> None:
    run_id = web.finish("Quick snapshot of NVDA")
    empty = web.decide(run_id, "edit", markdown="  \n")
    assert empty.status_code == 400 and "empty" in empty.json()["error"]
    assert web.store.get(run_id)["status"] == "pending"
    same = web.decide(run_id, "edit", markdown=web.store.get(run_id)["draft"] + "\n")
    assert same.json()["notes"] == ["The edit changed nothing: published as drafted."]
    assert web.store.get(run_id)["decision"]["edited"] is None


def test_reject_is_final(web) -> None:
    run_id = web.finish("Quick snapshot of META")
    assert web.decide(run_id, "reject").json()["message"].endswith("nothing published.")
    again = web.decide(run_id, "approve")
    assert again.status_code == 409 and "already rejected" in again.json()["error"]
    assert web.store.archive.get(run_id) is None


def test_a_run_without_a_draft_cannot_be_decided(web) -> None:
    web.store.create("ma-unfinished", "Quick snapshot of NVDA")
    response = web.decide("ma-unfinished", "approve")
    assert response.status_code == 409 and "no draft" in response.json()["error"]
    listed = web.client.get("/api/runs").json()["running"]
    assert [(r["run_id"], r["live"]) for r in listed] == [("ma-unfinished", False)]


# -- what is refused ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"request": "   "}, 400, "The request is empty"),
        ({"request": "x" * (MAX_REQUEST_CHARS + 1)}, 400, "at most 2000"),
        ({"request": "Quick snapshot of NVDA", "mode": "fast"}, 400, "mode must be auto"),
        ({"request": 42}, 400, "'request' must be a string"),
        ({}, 400, "'request' must be a string"),
    ],
)
def test_a_bad_request_is_refused_with_a_message(web, body, status, message) -> None:
    response = web.client.post("/api/runs", json=body)
    assert response.status_code == status and message in response.json()["error"]
    assert web.store.run_ids() == []


def test_only_json_from_this_page_changes_anything(web) -> None:
    form = web.client.post("/api/runs", data={"request": "Quick snapshot of NVDA"})
    assert form.status_code == 415
    foreign = web.client.post(
        "/api/runs",
        json={"request": "Quick snapshot of NVDA"},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403 and "evil.example" in foreign.json()["error"]
    broken = web.client.post(
        "/api/runs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]
    listed = web.client.post("/api/runs", json=["Quick snapshot of NVDA"])
    assert listed.status_code == 400
    rebound = web.client.get("/api/info", headers={"Host": "evil.example"})
    assert rebound.status_code == 400  # a DNS-rebinding page cannot read the API
    assert web.store.run_ids() == []


def test_unknown_runs_and_reports_are_404_with_a_message(web) -> None:
    assert "no run with id 'ma-nope'" in web.client.get("/api/runs/ma-nope").json()["error"]
    assert web.client.get("/api/runs/ma-nope/events").status_code == 404
    assert web.decide("ma-nope", "approve").status_code == 404
    assert web.client.get("/api/reports/ma-nope").status_code == 404
    bad = web.client.post("/api/runs/ma-nope/decision", json={"action": "publish"})
    assert bad.status_code == 400 and "approve, edit or reject" in bad.json()["error"]


def test_html_and_a_forged_heading_in_a_request_stay_text(web) -> None:
    run_id = web.finish(HOSTILE, "flash")
    record = web.client.get(f"/api/runs/{run_id}").json()
    assert record["request"] == HOSTILE  # sent as data; the page sets it as text
    assert "<script" not in record["draft_html"]
    assert web.decide(run_id, "approve").status_code == 200
    report = web.client.get(f"/api/reports/{run_id}").json()
    assert "<script" not in report["html"] and "&lt;script&gt;" in report["html"]
    assert not re.search(r"<h\d>\s*Heading", report["html"])


def test_markdown_is_rendered_without_passing_html_or_script_links_through() -> None:
    html = views.to_html(
        "# Title\n\n<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1)) | a |\n"
    )
    assert "<h1>Title</h1>" in html and "<img" not in html and "&lt;img" in html
    assert 'href="javascript' not in html


def test_table_alignment_is_a_class_not_a_style_attribute_the_policy_would_refuse() -> None:
    html = views.to_html("| a | b | c |\n|--:|:-:|:--|\n| 1 | 2 | 3 |\n")
    assert html.count('class="align-right"') == 2 and html.count('class="align-center"') == 2
    assert html.count('class="align-left"') == 2 and "style=" not in html


# -- model calls as they happen -----------------------------------------------------------


def _model_calls(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each model call in a feed: its `thinking` item's role, the `text` items that follow
    it, and the `model` item that ends it (text comes only while a call is open)."""
    calls: list[dict[str, Any]] = []
    for item in items:
        if item["kind"] == "thinking":
            assert not calls or calls[-1]["done"] is not None, "a call started inside another"
            calls.append({"role": item["role"], "text": [], "done": None})
        elif item["kind"] == "text":
            assert calls and calls[-1]["done"] is None and item["role"] == calls[-1]["role"]
            calls[-1]["text"].append(item)
        elif item["kind"] == "model":
            assert calls and calls[-1]["done"] is None
            calls[-1]["done"] = item
    return calls


def _written(call: dict[str, Any], part: str = "text") -> str:
    return "".join(t["text"] for t in call["text"] if t["part"] == part)


def test_each_model_call_streams_who_is_thinking_then_what_it_writes(web) -> None:
    run_id = web.start("Quick snapshot of NVDA")
    calls = _model_calls(web.feed(run_id))
    roles = ["router", "ReWOO planner", "ReWOO solver", "evaluator"]
    assert [c["role"] for c in calls] == roles
    assert all(c["done"] is not None and c["text"] for c in calls)
    record = web.store.get(run_id)
    assert _written(calls[2]) == record["notes"]  # the solver's answer, as it was written
    plan = json.loads(_written(calls[1]))  # the planner wrote its plan as JSON
    assert [s["tool_name"] for s in plan["steps"]] == [e["name"] for e in record["evidence"]]


def test_a_step_s_tool_calls_stream_as_they_are_written(web) -> None:
    calls = _model_calls(web.feed(web.start("Tell me about MSFT")))
    executor = [c for c in calls if c["role"] == "executor"]
    assert executor and {c["role"] for c in calls} >= {"planner", "replanner", "reporter"}
    asked = [_written(c, "tool_call") for c in executor if _written(c, "tool_call")]
    assert asked and asked[0].startswith("get_stock_snapshot {") and '"MSFT"' in asked[0]


class _Pausing:
    """The stand-in, except that the solver streams 40 pieces at once, pauses, then 40 more
    (the answer is the stand-in's, whatever the pieces said)."""

    def __init__(self) -> None:
        self.demo = DemoModel()

    async def acomplete(self, request: Any) -> Any:
        return await self.demo.acomplete(request)

    async def astream(self, request: Any) -> Any:
        response = await self.demo.acomplete(request)
        if role_of(request) == "solver":
            for i in range(80):
                if i == 40:
                    await asyncio.sleep(0.3)
                yield TextDelta(text=f"{i},")
        else:
            for delta in deltas(response):
                yield delta
        yield response


def _web_on(model: Any, tmp_path: Path) -> TestClient:
    store = AnalystStore(tmp_path / ".agentloops", tmp_path / "reports")
    settings = models.ModelSettings(provider="custom", model="test")
    return TestClient(
        create_app(store, models.Clients(model, model, model, settings)),
        base_url="http://127.0.0.1",
    )


def test_streamed_text_is_sent_in_pieces_gathered_over_a_tenth_of_a_second(tmp_path) -> None:
    with _web_on(_Pausing(), tmp_path) as client:
        web = Web(client, AnalystStore(tmp_path / ".agentloops", tmp_path / "reports"))
        calls = _model_calls(web.feed(web.start("Quick snapshot of NVDA")))
    [solver] = [c for c in calls if c["role"] == "ReWOO solver"]
    pieces = [t["text"] for t in solver["text"]]
    assert pieces == ["".join(f"{i}," for i in range(40)), "".join(f"{i}," for i in range(40, 80))]


def test_a_client_that_cannot_stream_still_shows_who_is_thinking(tmp_path) -> None:
    demo = DemoModel()

    class NoStream:  # only `acomplete`
        async def acomplete(self, request: Any) -> Any:
            return await demo.acomplete(request)

    with _web_on(NoStream(), tmp_path) as client:
        web = Web(client, AnalystStore(tmp_path / ".agentloops", tmp_path / "reports"))
        items = web.feed(web.start("Quick snapshot of NVDA"))
    calls = _model_calls(items)
    assert len(calls) == 4 and all(c["done"] is not None and c["text"] == [] for c in calls)
    assert items[-1]["status"] == "pending"


# -- the archive and the profile -------------------------------------------------------------


def test_the_archive_lists_and_searches_without_reading_query_syntax(web) -> None:
    assert web.client.get("/api/reports").json()["reports"] == []
    run_id = web.finish("Quick snapshot of NVDA")
    web.decide(run_id, "approve")
    [recent] = web.client.get("/api/reports").json()["reports"]
    assert recent["run_id"] == run_id and recent["recommendation"] in ("buy", "hold", "sell")
    for query in ("NVDA AND (", '"', "NEAR("):
        response = web.client.get("/api/reports", params={"q": query})
        assert response.status_code == 200, query
    assert web.client.get("/api/reports", params={"q": "zzzz"}).json()["reports"] == []


def test_the_profile_is_read_and_set_and_bad_fields_are_refused(web) -> None:
    profile = web.client.get("/api/profile").json()
    assert profile["risk_tolerance"] == "medium" and profile["holdings_text"] == ""
    saved = web.client.put(
        "/api/profile",
        json={"risk_tolerance": "low", "horizon": "long", "holdings_text": "nvda=10, MSFT=2.5"},
    )
    assert saved.status_code == 200
    assert saved.json()["holdings_text"] == "NVDA=10, MSFT=2.5"
    assert web.store.profile.get().holdings == {"NVDA": 10.0, "MSFT": 2.5}
    bad = web.client.put("/api/profile", json={"risk_tolerance": "reckless"})
    assert bad.status_code == 400 and "risk_tolerance" in bad.json()["error"]
    shares = web.client.put("/api/profile", json={"holdings_text": "NVDA=ten"})
    assert shares.status_code == 400 and "'ten' is not a number" in shares.json()["error"]
    assert web.store.profile.get().risk_tolerance == "low"
    run_id = web.finish("Quick snapshot of NVDA")  # new runs get the profile as memory
    assert "Risk tolerance: low." in web.store.get(run_id)["memory"]


def test_info_names_the_model_and_the_fixture_notice(web) -> None:
    info = web.client.get("/api/info").json()
    assert info["offline"] and "stand-in" in info["banner"] and "NOT live" in info["notice"]
    assert info["user"] == "tester" and info["modes"] == ["auto", "flash", "deep"]
    assert info["command"] == flags.command() and not info["command"].startswith("python ")
    page = web.client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    assert web.client.get("/static/app.js").status_code == 200


# -- the analyst on the asyncio driver -------------------------------------------------------------


@pytest.mark.parametrize("request_text", ["Quick snapshot of NVDA", "Tell me about MSFT"])
def test_the_asyncio_driver_reaches_the_same_record_as_the_blocking_one(
    tmp_path: Path, request_text: str
) -> None:
    blocking = Analyst(DemoModel(), AnalystStore(tmp_path / "a", tmp_path / "ra"))
    on_loop = Analyst(DemoModel(), AnalystStore(tmp_path / "b", tmp_path / "rb"))
    one = blocking.run(request_text, "ma-1")
    two = asyncio.run(on_loop.arun(request_text, "ma-1"))
    for field in ("route", "evidence", "draft", "draft_record", "verdict", "status"):
        assert one[field] == two[field], field
    assert one["calls_by_role"] == two["calls_by_role"]
    # (input estimates differ by a token where generated tool-call ids grew a digit)
    assert one["usage"]["output_tokens"] == two["usage"]["output_tokens"] > 0


def test_a_cancelled_run_says_where_it_stopped_and_continues_from_there(tmp_path: Path) -> None:
    store = AnalystStore(tmp_path / "s", tmp_path / "r")
    started = []

    async def cancel_in_research() -> None:
        def on_event(event: Any) -> None:
            if type(event).__name__ == "ToolCallStarted":
                started.append(event)

        analyst = Analyst(DemoModel(), store, on_event=on_event)
        task = asyncio.ensure_future(analyst.arun("Quick snapshot of NVDA", "ma-1"))
        while not started:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    tools.configure(latency_scale=0.5)  # the calls are still running when it is cancelled
    asyncio.run(cancel_in_research())
    tools.configure(latency_scale=0)
    stopped = store.get("ma-1")
    assert stopped["status"] == "running" and stopped["error"].startswith("CancelledError")
    assert "route" in stopped and "notes" not in stopped
    done = Analyst(DemoModel(), store).proceed("ma-1")
    assert done["status"] == "pending" and done["verdict"]["verdict"] == "pass"


def test_stopping_the_server_stops_its_runs_resumably(tmp_path: Path) -> None:
    store = AnalystStore(tmp_path / "s", tmp_path / "r")
    tools.configure(latency_scale=0.5)
    with TestClient(create_app(store, _offline()), base_url="http://127.0.0.1") as client:
        response = client.post("/api/runs", json={"request": "Tell me about MSFT"})
        run_id = response.json()["run_id"]
        deadline = time.monotonic() + 10
        while "route" not in store.get(run_id) and time.monotonic() < deadline:
            time.sleep(0.01)
    tools.configure(latency_scale=0)
    record = store.get(run_id)
    assert record["status"] == "running" and "CancelledError" in record["error"]
    assert Analyst(DemoModel(), store).proceed(run_id)["status"] == "pending"


def test_a_client_without_acomplete_runs_in_a_thread_under_the_asyncio_driver(
    tmp_path: Path,
) -> None:
    demo, threads = DemoModel(), []

    class Blocking:  # only `complete`, like a plain ModelClient
        def complete(self, request: Any) -> Any:
            threads.append(threading.get_ident())
            return demo.complete(request)

    store = AnalystStore(tmp_path / "s", tmp_path / "r")
    record = asyncio.run(Analyst(Blocking(), store).arun("Quick snapshot of NVDA", "ma-1"))
    assert record["status"] == "pending" and sum(record["calls_by_role"].values()) == 4
    assert len(threads) == 4  # router, planner, solver, evaluator: each metered
    assert threading.get_ident() not in threads  # never on the event loop's thread


# -- the command line and the web app, two processes, one store ---------------------------------


def test_the_cli_and_the_web_app_decide_each_other_s_runs(tmp_path: Path, monkeypatch) -> None:
    app = make_app(tmp_path, monkeypatch)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200")
    command = [sys.executable, str(EXAMPLES / "market_analyst.py"), "--web", "--latency", "0"]
    server = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        url = _served_url(server)
        with httpx.Client(base_url=url, timeout=10) as web:
            # started at the command line, approved in the web app
            assert app("Quick snapshot of NVDA") == 0
            from_cli = app.only_run()["run_id"]
            pending = [r["run_id"] for r in web.get("/api/runs").json()["pending"]]
            assert pending == [from_cli]
            approved = web.post(
                f"/api/runs/{from_cli}/decision", json={"action": "approve", "by": "webber"}
            )
            assert approved.status_code == 200
            assert app.store.get(from_cli)["status"] == "published"
            # started in the web app, approved at the command line, refused in the web app
            from_web = web.post("/api/runs", json={"request": "Quick snapshot of AMD"}).json()
            run_id = from_web["run_id"]
            _wait_for(lambda: web.get(f"/api/runs/{run_id}").json()["status"] == "pending")
            assert app("--resume", run_id, "--approve", "--by", "carol") == 0
            late = web.post(f"/api/runs/{run_id}/decision", json={"action": "approve"})
            assert late.status_code == 409
            assert "already published by carol (--approve)" in late.json()["error"]
            record = app.store.get(run_id)
            assert record["settings"]["provider"] == "offline"  # resumable on the same model
        assert sorted(p.name for p in app.reports()) == sorted([f"{from_cli}.md", f"{run_id}.md"])
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=15)
    assert server.returncode == 0, err
    assert "Traceback" not in err


def _served_url(server: subprocess.Popen[str]) -> str:
    assert server.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        found = re.search(r"web app on (http://127\.0\.0\.1:\d+/)", line)
        if found:
            return found.group(1)
        if not line and server.poll() is not None:
            break
    raise AssertionError(f"the web app did not start: {server.stderr and server.stderr.read()}")


def _wait_for(condition: Any, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# -- the command ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--web", "Quick snapshot of NVDA"], "type the request there"),
        (["--port", "8000"], "--port goes with --web"),
        (["--web", "--port", "70000"], "must be 0 to 65535"),
        (["--web", "--port", "http"], "is not a port number"),
    ],
)
def test_web_flags_are_checked(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.parse_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_without_the_web_extra_the_command_names_it(tmp_path, monkeypatch, capsys) -> None:
    app = make_app(tmp_path, monkeypatch)
    monkeypatch.setitem(sys.modules, "market_analyst.web.serve", None)  # as if not installed
    assert app("--web") == 2
    assert "pip install 'agentloops-kit[web]'" in capsys.readouterr().out


def test_a_port_in_use_is_reported(tmp_path: Path) -> None:
    taken = serve.bind(0)
    said: list[str] = []
    try:
        store = AnalystStore(tmp_path / "s", tmp_path / "r")
        code = serve.serve_store(store, _offline(), port=taken.getsockname()[1], say=said.append)
    finally:
        taken.close()
    assert code == 2 and said[0].startswith("Cannot serve on 127.0.0.1:")


# -- a run this server does not drive: its feed from the journals ---------------------


def test_after_a_restart_the_feed_of_a_run_comes_from_its_journals(web, tmp_path) -> None:
    run_id = web.start("Quick snapshot of NVDA")
    live = web.feed(run_id)
    restarted = create_app(web.store, _offline(), user="tester")  # a new server, same store
    with TestClient(restarted, base_url="http://127.0.0.1") as client:
        again = Web(client, web.store).feed(run_id)
        assert [i["id"] for i in again] == list(range(len(again)))

        def shown(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
            """What both feeds show: the stages, the research loop's plan, tool calls and
            model calls, and the end (live only: thinking, text, other roles' calls)."""
            research = {"rewoo", "plan_execute", "react"}
            return [
                (i["kind"], i.get("stage"), i.get("key"), i.get("phase"), i.get("status"))
                for i in items
                if i["kind"] in ("stage", "plan", "tool", "end")
                or (i["kind"] == "model" and i["loop"] in research)
            ]

        assert shown(again) == shown(live) and len(shown(again)) >= 10
        assert {i["kind"] for i in again} <= {"stage", "plan", "tool", "model", "end"}
        tail = Web(client, web.store).feed(run_id, last_id=again[-3]["id"])  # reattach
        assert [i["id"] for i in tail] == [again[-2]["id"], again[-1]["id"]]
        assert tail[-1] == again[-1] and tail[-1]["status"] == "pending"
        draft = next(i for i in again if i.get("stage") == "draft")
        assert "<h2>" in draft["draft_html"]
