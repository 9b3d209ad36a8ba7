"""The web app: a Starlette application over the same store as the command line.

`create_app(store, clients)` serves the page (`static/`, plain HTML, CSS and a little
JavaScript, no build step) and a small JSON API under `/api`. A run started here is
driven on the server's event loop (`Analyst.aproceed`, the loops' asyncio drivers) and
watched through server-sent events (its model calls streamed into them as they are
written, when the client can stream); it is a journal in `analyst.db` like a command-line
run, so either side can decide it, and `AnalystStore.decide` lets the first decision win
across tabs and processes. A run, decision or trade another process holds is refused
with 409 and the lease's holder and expiry, which the page shows. The app binds to
loopback only and refuses requests whose Host or Origin is not this machine's, and bodies
that are not JSON, so another web site open in the same browser cannot start or decide
runs; bodies are capped before they are read (`guard`), and every answer carries a
Content-Security-Policy (`policy`).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pydantic
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from market_analyst import tools
from market_analyst.approve import figures_not_in_evidence
from market_analyst.demo_model import BANNER
from market_analyst.flags import command
from market_analyst.memory import Profile, parse_holdings, parse_tickers
from market_analyst.models import Clients
from market_analyst.store import PENDING, PUBLISHED, RUNNING, AnalystStore
from market_analyst.trading import TRADABLE
from market_analyst.web import views
from market_analyst.web.guard import BadInput, error, guarded, json_body, text_field
from market_analyst.web.live import LiveRun, LiveRuns
from market_analyst.web.policy import SecurityHeaders
from market_analyst.web.replayed import journal_feed
from market_analyst.web.trade_api import TradeAPI, trade_view
from market_analyst.workflow import MODES, Analyst

STATIC = Path(__file__).with_name("static")
MAX_REQUEST_CHARS = 2000
EXAMPLE = "Quick snapshot of NVDA"
LOOPBACK = ("127.0.0.1", "localhost")


class WebApp:
    """The app's state and handlers: one store, one set of clients, the live runs."""

    def __init__(self, store: AnalystStore, clients: Clients, *, user: str | None = None):
        self.store, self.clients = store, clients
        self.user = user or _login_name()
        self.live = LiveRuns()
        self.trades = TradeAPI(store, clients, self.user)

    def routes(self) -> list[Route | Mount]:
        api: list[tuple[str, Callable[..., Any], list[str]]] = [
            ("/api/info", self.info, ["GET"]),
            ("/api/runs", self.list_runs, ["GET"]),
            ("/api/runs", self.start_run, ["POST"]),
            ("/api/runs/{run_id}", self.get_run, ["GET"]),
            ("/api/runs/{run_id}/events", self.events, ["GET"]),
            ("/api/runs/{run_id}/decision", self.decide, ["POST"]),
            ("/api/reports", self.reports, ["GET"]),
            ("/api/reports/{run_id}", self.report, ["GET"]),
            ("/api/profile", self.get_profile, ["GET"]),
            ("/api/profile", self.set_profile, ["PUT"]),
            *self.trades.endpoints(),
        ]
        return [
            Route("/", self.index, methods=["GET"]),
            *(Route(path, guarded(fn), methods=methods) for path, fn, methods in api),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        yield
        await self.live.stop()  # a run cut short here is resumable from the command line

    # -- the page and what it reads -------------------------------------------------

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def info(self, request: Request) -> Response:
        settings = self.clients.settings
        return JSONResponse(
            {
                "model": settings.describe(),
                "offline": settings.provider == "offline",
                "banner": BANNER if settings.provider == "offline" else "",
                "notice": tools.settings.source.notice,
                "data_source": tools.settings.source.name,
                "user": self.user,
                "modes": ["auto", *MODES],
                "command": command(),  # the command line, as it runs from the server's cwd
            }
        )

    async def list_runs(self, request: Request) -> Response:
        records = await run_in_threadpool(self.store.runs_with, PENDING, RUNNING)
        live = self.live.running()
        by_status: dict[str, list[dict[str, Any]]] = {"pending": [], "running": []}
        for record in reversed(records):  # newest first
            by_status[record["status"]].append(
                views.run_summary(record, live=record["run_id"] in live)
            )
        return JSONResponse(by_status)

    async def get_run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        record = await run_in_threadpool(self.store.get, run_id)
        return JSONResponse(await self._view(record))

    async def _view(self, record: dict[str, Any]) -> dict[str, Any]:
        live = self.live.get(record["run_id"])
        running = live is not None and not live.done
        view = views.run_view(record, live=live is not None, running=running)
        trade = await run_in_threadpool(self.store.trades.for_run, record["run_id"])
        recommendation = (record.get("draft_record") or {}).get("recommendation")
        view["trade"] = trade_view(trade) if trade is not None else None
        view["tradable"] = (
            trade is None and record["status"] == PUBLISHED and recommendation in TRADABLE
        )
        view["recommendation"] = recommendation
        return view

    async def events(self, request: Request) -> Response:
        """The run's feed as server-sent events, from the start or after `Last-Event-ID`:
        live for a run this server drives, else from its journals (`web.replayed`)."""
        run_id = request.path_params["run_id"]
        live = self.live.get(run_id)
        try:
            start = int(request.headers.get("last-event-id", "-1")) + 1
        except ValueError:
            start = 0
        if live is None:  # driven elsewhere, or before a restart: from its journals
            await run_in_threadpool(self.store.get, run_id)  # 404 for an unknown run
            items = journal_feed(self.store, run_id, views.to_html, start)
        else:
            items = live.follow(start)

        async def stream() -> AsyncIterator[str]:
            async for i, item in items:
                yield f"id: {i}\ndata: {json.dumps(item)}\n\n"

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    async def reports(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if query:
            found: list[Any] = await run_in_threadpool(self.store.archive.search, query)
        else:
            found = await run_in_threadpool(self.store.archive.recent, 20)
        return JSONResponse({"query": query, "reports": [views.report_line(r) for r in found]})

    async def report(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        found = await run_in_threadpool(self.store.archive.get, run_id)
        if found is None:
            return error(f"no published report for run {run_id}", 404)
        return JSONResponse(views.report_view(found))

    async def get_profile(self, request: Request) -> Response:
        profile = await run_in_threadpool(self.store.profile.get)
        return JSONResponse(views.profile_view(profile))

    # -- what changes things --------------------------------------------------------

    async def set_profile(self, request: Request) -> Response:
        body = await json_body(request)
        changes = {k: body[k] for k in Profile.model_fields if k in body}
        if "holdings_text" in body:
            changes["holdings"] = parse_holdings(text_field(body, "holdings_text"))
        if "trade_tickers_text" in body:
            changes["trade_tickers"] = parse_tickers(text_field(body, "trade_tickers_text"))
        try:
            profile = await run_in_threadpool(lambda: self.store.profile.update(**changes))
        except pydantic.ValidationError as exc:
            reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return error(f"Profile not changed: {reasons}", 400)
        return JSONResponse(views.profile_view(profile))

    async def start_run(self, request: Request) -> Response:
        body = await json_body(request)
        text, mode = text_field(body, "request"), text_field(body, "mode", "auto")
        if not text.strip():
            raise BadInput(
                'The request is empty: say what you want, e.g. "Quick snapshot of NVDA".'
            )
        if len(text) > MAX_REQUEST_CHARS:
            raise BadInput(f"The request is {len(text)} characters; at most {MAX_REQUEST_CHARS}.")
        run_id = "ma-" + uuid.uuid4().hex[:8]
        live = LiveRun(run_id, views.to_html)
        analyst = Analyst(
            live.watch(self.clients.main),
            self.store,
            planner=live.watch(self.clients.planner),
            executor=live.watch(self.clients.executor),
            on_event=live.on_event,
            notify=live.on_stage,
        )
        settings = self.clients.settings
        await run_in_threadpool(
            lambda: analyst.start(
                text,
                run_id,
                mode=mode,
                model=settings.describe(),
                settings=settings.to_dict(),
                data_notice=tools.settings.source.notice,
            )
        )
        self.live.start(run_id, analyst, live)
        return JSONResponse({"run_id": run_id}, status_code=202)

    async def decide(self, request: Request) -> Response:
        """Approve, approve with an edit, or reject; the first decision on a run wins."""
        run_id = request.path_params["run_id"]
        body = await json_body(request)
        action = text_field(body, "action")
        if action not in ("approve", "edit", "reject"):
            raise BadInput(f"action must be approve, edit or reject, got {action!r}")
        by = " ".join(text_field(body, "by", self.user).split())[:80] or self.user
        record = await run_in_threadpool(self.store.get, run_id)
        edited, notes = None, []
        if action == "edit":
            edited = text_field(body, "markdown")
            if not edited.strip():
                raise BadInput("The edited report is empty; nothing was published.")
            if edited.strip() == (record.get("draft") or "").strip():
                edited, notes = None, ["The edit changed nothing: published as drafted."]
            elif invented := figures_not_in_evidence(record, edited):
                notes = [
                    f"The edit states figures no tool output holds: {', '.join(invented[:8])}. "
                    "It is published as you wrote it."
                ]
        approve = action != "reject"
        via = "web, edited" if edited is not None else "web"
        record, changed = await run_in_threadpool(
            lambda: self.store.decide(run_id, approve, by=by, via=via, edited=edited)
        )
        view = await self._view(record)
        if not changed:
            return error(_already(record, approve), 409, run=view)
        if record["status"] == PUBLISHED:
            message = f"Published {run_id} as {record['report_path']}."
        else:
            message = f"Run {run_id} rejected for good; nothing published."
        return JSONResponse({"message": message, "notes": notes, "run": view})


def _already(record: dict[str, Any], approve: bool) -> str:
    """Why a second decision changed nothing, naming the first one."""
    first = record.get("decision") or {}
    mine = "approval" if approve else "rejection"
    return (
        f"Run {record['run_id']} was already {record['status']} by {first.get('by', '?')} "
        f"({first.get('via', '?')}) at {first.get('at', '?')}; your {mine} changed nothing."
    )


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "web"


def create_app(
    store: AnalystStore,
    clients: Clients,
    *,
    user: str | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK,
) -> Starlette:
    """The web app over `store`, running new requests on `clients`.

    Args:
        store: the command line's store (the same `--state-dir`).
        clients: the model per role, as the command line builds them.
        user: who decides, unless the page says otherwise (default: the login name).
        allowed_hosts: the Host headers accepted (loopback names; tests add theirs).
    """
    web = WebApp(store, clients, user=user)
    return Starlette(
        routes=web.routes(),
        lifespan=web.lifespan,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
        ],
    )
