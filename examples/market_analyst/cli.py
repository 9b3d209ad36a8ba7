"""The command line: pick the models, run the graph with a live view, then ask a person.

.venv/bin/python examples/market_analyst.py "Quick snapshot of NVDA"
.venv/bin/python examples/market_analyst.py "Tell me about MSFT" --mode flash --yes
.venv/bin/python examples/market_analyst.py --resume RUN_ID --approve
.venv/bin/python examples/market_analyst.py --profile --risk-tolerance low --holdings NVDA=10
.venv/bin/python examples/market_analyst.py --search "export rules"
.venv/bin/python examples/market_analyst.py --web       # the web app on 127.0.0.1 (the `web` extra)

A run, a decision or a trade another process is working on is refused with one line
naming the holder of its lease and until when, and exit status 75 (`journal.LEASED`).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from agentloops import AgentLoopsError, ConfigurationError, ModelClient, RunLeased, Usage
from market_analyst import browse, journal, models, tools, trade_cli
from market_analyst.approve import Ask, approval, who
from market_analyst.demo_model import BANNER
from market_analyst.display import RunView, line, usage_table, verdict_panel
from market_analyst.flags import command_for, parse_args
from market_analyst.layout import OldStateFile
from market_analyst.prompts import FLASH
from market_analyst.sources import MissingExtra, live_source
from market_analyst.store import PUBLISHED, RUNNING, AnalystStore, UnknownRun
from market_analyst.workflow import Analyst


def resume_command(args: argparse.Namespace, run_id: str) -> str:
    """The whole command that continues `run_id`, with the state directories if moved."""
    return command_for(args, "--resume", run_id)


def main(
    argv: list[str] | None = None, *, model: ModelClient | None = None, ask: Ask | None = None
) -> int:
    """Run the CLI; returns the exit code. `model` replaces every role's client and
    `ask` the terminal prompt (both for tests)."""
    args = parse_args(argv)
    console = Console(highlight=False)
    try:
        store = AnalystStore(
            args.state_dir,
            args.reports_dir,
            lease_ttl=args.lease_ttl,
            label="web" if args.web else "cli",
        )
    except OldStateFile as exc:
        console.print(line((str(exc), "red")), soft_wrap=True)  # the command stays whole
        return 2
    try:
        return _main(args, console, store, model, ask)
    except RunLeased as exc:  # another process works on this run or trade now
        console.print(line((journal.lease_message(exc), "yellow")), soft_wrap=True)
        return journal.LEASED


def _main(
    args: argparse.Namespace,
    console: Console,
    store: AnalystStore,
    model: ModelClient | None,
    ask: Ask | None,
) -> int:
    if args.list:
        return browse.list_runs(console, store)
    if args.show:
        return browse.show(console, store, args.show)
    if args.reports:
        return browse.reports(console, store)
    if args.search is not None:
        return browse.search(console, store, args.search)
    if args.profile:
        return browse.profile(console, store, args)
    if args.trades:
        return trade_cli.list_trades(console, store)
    tools.configure(latency_scale=args.latency, ledger_path=store.ledger_path)
    if args.live:
        try:
            tools.configure(source=live_source())
        except MissingExtra as exc:
            console.print(line((str(exc), "red")))
            return 2
    if args.web:
        return _web(console, args, store, model)
    if ask is None and sys.stdin.isatty():
        ask = lambda prompt: console.input(Text(prompt))  # noqa: E731 (a prompt is data too)

    def model_for(record: dict[str, Any]) -> ModelClient:  # the trader: the run's own model
        return _clients(console, args, record.get("settings"), model).main

    if args.approve_trade or args.deny_trade:
        journal.refuse_if_held(store.runs, args.approve_trade or args.deny_trade)
        return trade_cli.decide(console, store, args, model_for)
    saved: dict[str, Any] | None = None
    if args.resume:
        try:
            record = store.get(args.resume)
        except UnknownRun as exc:
            console.print(line((str(exc), "red")))
            return 2
        journal.refuse_if_held(store.runs, args.resume)
        if record["status"] != RUNNING:
            was = record["status"]
            hint = resume_command(args, args.resume)
            code = approval(console, store, record, args, ask, hint)
            fresh = was != PUBLISHED
            offer = trade_cli.offer(
                console, store, args.resume, args, ask, model_for, just_published=fresh
            )
            return code or offer
        if args.approve or args.reject or args.edit or args.edited:
            console.print(
                line(
                    (
                        "This run stopped before its draft; it continues first, and you decide "
                        "after reading the draft.",
                        "yellow",
                    )
                )
            )
            args.approve = args.reject = args.edit = False
            args.edited = None
        saved = record.get("settings")
    try:
        clients = _clients(console, args, saved, model)
    except (models.MissingCredentials, ConfigurationError) as exc:
        console.print(line((f"Cannot start the model: {exc}", "red")))
        return 2
    run_id = args.resume or "ma-" + uuid.uuid4().hex[:8]
    view = RunView(console)
    analyst = Analyst(
        view.watch(clients.main),
        store,
        planner=view.watch(clients.planner),
        executor=view.watch(clients.executor),
        on_event=view,
        notify=lambda stage, record: show_stage(console, stage, record),
    )
    hint = resume_command(args, run_id)
    try:
        if args.resume:
            console.print(line("Resuming run ", (run_id, "bold"), " where it stopped."))
            record = analyst.proceed(run_id)
        else:
            console.print(line("Run ", (run_id, "bold"), f": {args.request}"))
            settings = clients.settings
            record = analyst.run(
                args.request,
                run_id,
                mode=args.mode,
                model=settings.describe(),
                settings=settings.to_dict(),
                data_notice=tools.settings.source.notice,
            )
    except RunLeased:
        raise
    except AgentLoopsError as exc:
        console.print(line((f"The run stopped: {type(exc).__name__}: {exc}", "red")))
        console.print(
            line(f"Everything finished so far is saved. Continue with: {hint}"), soft_wrap=True
        )
        console.print(line(f"(it continues on the same model: {clients.settings.describe()})"))
        return 1
    except KeyboardInterrupt:
        console.print(
            line(f"\nInterrupted. Everything finished so far is saved: {hint}"), soft_wrap=True
        )
        return 130
    show_outcome(console, record)
    code = approval(console, store, record, args, ask, hint)
    main_model = lambda record: clients.main  # noqa: E731
    return code or trade_cli.offer(
        console, store, run_id, args, ask, main_model, just_published=True
    )


def _clients(
    console: Console,
    args: argparse.Namespace,
    saved: dict[str, Any] | None,
    model: ModelClient | None,
) -> models.Clients:
    if model is not None:
        window = getattr(args, "context_window", None)
        settings = models.ModelSettings(
            provider="custom", model=type(model).__name__, context_window=window
        )
        return models.Clients(model, model, model, settings)
    settings = models.from_args(args, saved)
    clients = models.build(settings)
    if clients.settings.provider == "offline":
        console.print(Panel(Text(BANNER), title="deterministic stand-in", border_style="yellow"))
    else:
        console.print(line("Model: ", (clients.settings.describe(), "bold")))
    ignored = models.ignored_flags(args, clients.settings)
    if ignored:
        console.print(line((f"Ignored with this model: {', '.join(ignored)}.", "yellow")))
    return clients


def _web(
    console: Console, args: argparse.Namespace, store: AnalystStore, model: ModelClient | None
) -> int:
    """Serve the web app over `store`, on the models a run started here would use."""
    try:
        from market_analyst.web.serve import serve_store
    except ImportError as exc:
        missing = f"{exc.name} is not installed" if exc.name else str(exc)
        console.print(
            line(
                (
                    f"The web app needs the 'web' extra ({missing}): "
                    "pip install 'agentloops-kit[web]'",
                    "red",
                )
            )
        )
        return 2
    try:
        clients = _clients(console, args, None, model)
    except (models.MissingCredentials, ConfigurationError) as exc:
        console.print(line((f"Cannot start the model: {exc}", "red")))
        return 2
    say = lambda text: console.print(line((text, "bold")))  # noqa: E731
    return serve_store(store, clients, port=args.port, user=who(args), say=say)


def show_stage(console: Console, stage: str, record: dict[str, Any]) -> None:
    if stage == "route":
        loop = "ReWOO" if record["route"] == FLASH else "Plan-and-Execute"
        title = Text(f"Route: {record['route']} ({loop})")
        console.print(Panel(Text(record["route_reasoning"]), title=title))
    elif stage == "draft":
        console.print(Panel(Markdown(record["draft"]), title="Draft"))


def show_outcome(console: Console, record: dict[str, Any]) -> None:
    """Usage (the whole run's, across resumes), then the verdict."""
    usage = Usage(**record.get("usage", {}))
    console.print(usage_table(usage, record.get("calls_by_role", {})))
    console.print(verdict_panel(record["verdict"]["verdict"], record["verdict"]["reasons"]))
