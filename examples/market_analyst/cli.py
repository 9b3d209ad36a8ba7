"""The command line: pick the models, run the graph with a live view, then ask a person.

python examples/market_analyst.py "Quick snapshot of NVDA"
python examples/market_analyst.py "Tell me about MSFT" --mode flash --yes
python examples/market_analyst.py --resume RUN_ID --approve
python examples/market_analyst.py --profile --risk-tolerance low --holdings NVDA=10
python examples/market_analyst.py --search "export rules"
python examples/market_analyst.py --web       # the web app on 127.0.0.1 (the `web` extra)
"""

from __future__ import annotations

import argparse
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any, get_args

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from agentloops import AgentLoopsError, ConfigurationError, ModelClient, Usage
from market_analyst import browse, models, tools
from market_analyst.approve import Ask, approval, who
from market_analyst.demo_model import BANNER
from market_analyst.display import RunView, line, usage_table, verdict_panel
from market_analyst.memory import Profile
from market_analyst.prompts import FLASH
from market_analyst.store import RUNNING, RunStore, UnknownRun
from market_analyst.workflow import Analyst

SCRIPT = "python examples/market_analyst.py"
STATE_DIR, REPORTS_DIR = Path(".agentloops"), Path("reports")


def _not_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 to 65535, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=SCRIPT,
        description="Market Analyst: route, research, write, evaluate; a person approves.",
    )
    p.add_argument("request", nargs="?", help='e.g. "Quick snapshot of NVDA"')
    run = p.add_argument_group("a run")
    run.add_argument(
        "--mode",
        choices=("auto", "flash", "deep"),
        default="auto",
        help="force a route (auto: the router decides; unclear requests go deep)",
    )
    run.add_argument("--yes", action="store_true", help="approve a passing draft at once")
    run.add_argument("--resume", metavar="RUN_ID", help="continue or decide a saved run")
    decision = run.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="with --resume: publish")
    decision.add_argument("--reject", action="store_true", help="with --resume: reject for good")
    decision.add_argument(
        "--edit", action="store_true", help="with --resume: edit the draft in $EDITOR, then publish"
    )
    decision.add_argument(
        "--edited",
        type=Path,
        metavar="FILE",
        help="with --resume: publish this edited Markdown instead of the draft",
    )
    run.add_argument("--by", metavar="NAME", help="who decides (default: your login name)")
    run.add_argument(
        "--latency",
        type=_not_negative,
        default=1.0,
        help="simulated tool latency scale (0 = instant)",
    )
    model = p.add_argument_group("models (remembered by the run; --resume reuses them)")
    model.add_argument("--offline", action="store_true", help="use the offline stand-in model")
    model.add_argument(
        "--base-url", help="an OpenAI-compatible server, e.g. http://localhost:11434/v1"
    )
    model.add_argument("--model", help="model name (with --base-url, or a Claude model)")
    model.add_argument("--planner-model", help="a different model for the planners")
    model.add_argument("--executor-model", help="a different model for the research steps")
    model.add_argument(
        "--structured",
        metavar="MODE",
        help="how the OpenAI-compatible client gets JSON (auto, json_schema, prompt)",
    )
    model.add_argument("--max-tokens", type=_positive_int, help="output limit per model call")
    look = p.add_argument_group("runs, archive and profile")
    look.add_argument("--list", action="store_true", help="list runs waiting or stopped")
    look.add_argument("--show", metavar="RUN_ID", help="print a run's draft or published report")
    look.add_argument("--reports", action="store_true", help="list published reports")
    look.add_argument("--search", metavar="WORDS", help="full-text search of published reports")
    look.add_argument("--profile", action="store_true", help="show (or, with the flags, set) it")
    fields = Profile.model_fields
    look.add_argument("--risk-tolerance", choices=get_args(fields["risk_tolerance"].annotation))
    look.add_argument("--horizon", choices=get_args(fields["horizon"].annotation))
    look.add_argument("--holdings", metavar="T=N,...", help='e.g. "NVDA=10,MSFT=2.5" ("" clears)')
    look.add_argument("--preferences", metavar="TEXT")
    web = p.add_argument_group("the web app (needs the `web` extra)")
    web.add_argument(
        "--web",
        action="store_true",
        help="serve the web app on 127.0.0.1 over the same state; type requests in the page",
    )
    web.add_argument(
        "--port", type=_port, default=0, help="with --web: the port (default: a free one)"
    )
    p.add_argument("--state-dir", type=Path, default=STATE_DIR)
    p.add_argument("--reports-dir", type=Path, default=REPORTS_DIR)
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked: a blank request or a decision without --resume is refused."""
    p = parser()
    args = p.parse_args(argv)
    args.profile = args.profile or any(getattr(args, k) is not None for k in browse.PROFILE_FLAGS)
    if (args.approve or args.reject or args.edit or args.edited) and not args.resume:
        p.error("--approve, --reject, --edit and --edited need --resume RUN_ID")
    if args.request is not None and not args.request.strip():
        p.error('the request is empty; say what you want, e.g. "Quick snapshot of NVDA"')
    if args.web and args.request:
        p.error("--web serves the page; type the request there, not on the command line")
    if args.port and not args.web:
        p.error("--port goes with --web")
    if not (
        args.web
        or args.request
        or args.resume
        or args.list
        or args.show
        or args.reports
        or args.search is not None
        or args.profile
    ):
        p.error(
            "give a request, --resume RUN_ID, --list, --show, --reports, --search, --profile "
            "or --web"
        )
    return args


def resume_command(args: argparse.Namespace, run_id: str) -> str:
    """The whole command that continues `run_id`, with the state directories if moved."""
    parts = [SCRIPT, "--resume", run_id]
    if args.state_dir != STATE_DIR:
        parts += ["--state-dir", shlex.quote(str(args.state_dir))]
    if args.reports_dir != REPORTS_DIR:
        parts += ["--reports-dir", shlex.quote(str(args.reports_dir))]
    return " ".join(parts)


def main(
    argv: list[str] | None = None, *, model: ModelClient | None = None, ask: Ask | None = None
) -> int:
    """Run the CLI; returns the exit code. `model` replaces every role's client and
    `ask` the terminal prompt (both for tests)."""
    args = parse_args(argv)
    console = Console(highlight=False)
    store = RunStore(args.state_dir, args.reports_dir)
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
    tools.configure(latency_scale=args.latency, ledger_path=args.state_dir / "ledger.jsonl")
    if args.web:
        return _web(console, args, store, model)
    if ask is None and sys.stdin.isatty():
        ask = lambda prompt: console.input(Text(prompt))  # noqa: E731 (a prompt is data too)
    saved: dict[str, Any] | None = None
    if args.resume:
        try:
            record = store.get(args.resume)
        except UnknownRun as exc:
            console.print(line((str(exc), "red")))
            return 2
        if record["status"] != RUNNING:
            return approval(console, store, record, args, ask, resume_command(args, args.resume))
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
        clients.main,
        store,
        planner=clients.planner,
        executor=clients.executor,
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
            )
    except AgentLoopsError as exc:
        console.print(line((f"The run stopped: {type(exc).__name__}: {exc}", "red")))
        console.print(line(f"Everything finished so far is saved. Continue with: {hint}"))
        console.print(line(f"(it continues on the same model: {clients.settings.describe()})"))
        return 1
    except KeyboardInterrupt:
        console.print(line(f"\nInterrupted. Everything finished so far is saved: {hint}"))
        return 130
    show_outcome(console, record)
    return approval(console, store, record, args, ask, hint)


def _clients(
    console: Console,
    args: argparse.Namespace,
    saved: dict[str, Any] | None,
    model: ModelClient | None,
) -> models.Clients:
    if model is not None:
        settings = models.ModelSettings(provider="custom", model=type(model).__name__)
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
    console: Console, args: argparse.Namespace, store: RunStore, model: ModelClient | None
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
