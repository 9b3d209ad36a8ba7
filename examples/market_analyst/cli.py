"""The command line: pick a model, run the graph with a live view, then ask a person.

python examples/market_analyst.py "Quick snapshot of NVDA"
python examples/market_analyst.py "Investment thesis and strategic risks for MSFT" --yes
python examples/market_analyst.py --resume RUN_ID --approve
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.prompt import Confirm

from agentloops import AgentLoopsError, ModelClient, Usage
from market_analyst import tools
from market_analyst.demo_model import BANNER, MODEL_NAME, DemoModel
from market_analyst.display import RunView, usage_table, verdict_panel
from market_analyst.store import PENDING, PUBLISHED, REJECTED, RunStore, UnknownRun
from market_analyst.workflow import Analyst

SCRIPT = "python examples/market_analyst.py"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=SCRIPT,
        description="Market Analyst: route, research, evaluate, then a person approves.",
    )
    p.add_argument("request", nargs="?", help='e.g. "Quick snapshot of NVDA"')
    p.add_argument("--yes", action="store_true", help="approve a passing draft at once")
    p.add_argument("--resume", metavar="RUN_ID", help="continue or decide a saved run")
    decision = p.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="with --resume: publish")
    decision.add_argument("--reject", action="store_true", help="with --resume: discard")
    p.add_argument("--list", action="store_true", help="list runs waiting for a decision")
    p.add_argument("--state-dir", type=Path, default=Path(".agentloops"))
    p.add_argument("--reports-dir", type=Path, default=Path("reports"))
    p.add_argument("--base-url", help="an OpenAI-compatible server, e.g. http://localhost:11434/v1")
    p.add_argument("--model", help="model name (with --base-url, or a Claude model)")
    p.add_argument("--offline", action="store_true", help="use the offline demo model")
    p.add_argument(
        "--latency", type=float, default=1.0, help="simulated tool latency scale (0 = instant)"
    )
    args = p.parse_args(argv)
    if (args.approve or args.reject) and not args.resume:
        p.error("--approve and --reject need --resume RUN_ID")
    if not (args.request or args.resume or args.list):
        p.error("give a request, --resume RUN_ID, or --list")
    return args


def choose_model(args: argparse.Namespace) -> tuple[ModelClient, str, bool]:
    """(client, description, offline): Claude with a key, a server with --base-url,
    else the offline demo model."""
    if args.offline:
        return DemoModel(), MODEL_NAME, True
    if args.base_url:
        from agentloops.providers.openai_compat import OpenAICompatModel

        name = args.model or "qwen3:8b"
        key = os.environ.get("OPENAI_API_KEY")
        return (
            OpenAICompatModel(args.base_url, name, api_key=key),
            f"{name} at {args.base_url}",
            False,
        )
    if os.environ.get("ANTHROPIC_API_KEY"):
        from agentloops.providers.anthropic import AnthropicModel

        model = AnthropicModel(args.model) if args.model else AnthropicModel()
        return model, f"Claude ({getattr(model, 'model', args.model)})", False
    return DemoModel(), MODEL_NAME, True


def main(argv: list[str] | None = None, *, model: ModelClient | None = None) -> int:
    """Run the CLI; returns the exit code. `model` overrides the choice (for tests)."""
    args = parse_args(argv)
    console = Console(highlight=False)
    store = RunStore(args.state_dir, args.reports_dir)
    if args.list:
        return list_runs(console, store)
    tools.configure(latency_scale=args.latency, ledger_path=args.state_dir / "ledger.jsonl")
    if args.resume:
        try:
            record = store.get(args.resume)
        except UnknownRun as exc:
            console.print(f"[red]{exc}[/]")
            return 2
        if record["status"] in (PENDING, PUBLISHED, REJECTED):
            return approval(console, store, record, args)
        if args.approve or args.reject:  # nobody has seen the draft this run will write
            console.print(
                "[yellow]This run stopped before its draft; it continues first, "
                "and you decide after reading the draft.[/]"
            )
            args.approve = args.reject = False
    if model is None:
        model, name, offline = choose_model(args)
    else:
        name, offline = type(model).__name__, isinstance(model, DemoModel)
    if offline:
        console.print(Panel(BANNER, title="deterministic stand-in", border_style="yellow"))
        if args.model and not args.offline:
            console.print(
                f"[yellow]--model {args.model} is ignored: no --base-url and no "
                "ANTHROPIC_API_KEY.[/]"
            )
    else:
        console.print(f"Model: [bold]{name}[/]")
    view = RunView(console)
    analyst = Analyst(model, store, on_event=view, notify=lambda s, r: show_stage(console, s, r))
    run_id = args.resume or new_run_id()
    try:
        if args.resume:
            console.print(f"Resuming run [bold]{run_id}[/] where it stopped.")
            record = analyst.proceed(run_id)
        else:
            console.print(f"Run [bold]{run_id}[/]: {args.request}")
            record = analyst.run(args.request, run_id, model_name=name)
    except AgentLoopsError as exc:
        console.print(f"[red]The run stopped: {type(exc).__name__}: {exc}[/]")
        console.print(
            f"Everything finished so far is saved. Continue with: {SCRIPT} --resume {run_id}"
        )
        return 1
    show_outcome(console, record)
    return approval(console, store, record, args)


def new_run_id() -> str:
    return "ma-" + uuid.uuid4().hex[:8]


def show_stage(console: Console, stage: str, record: dict[str, Any]) -> None:
    if stage == "route":
        loop = "ReWOO" if record["route"] == "flash_briefing" else "Plan-and-Execute"
        console.print(Panel(record["route_reasoning"], title=f"Route: {record['route']} ({loop})"))
    elif stage == "draft":
        console.print(Panel(Markdown(record["draft"]), title="Draft"))


def show_outcome(console: Console, record: dict[str, Any]) -> None:
    """Usage (the whole run's, across resumes), then the evaluator's verdict."""
    usage = Usage(**record.get("usage", {}))
    console.print(usage_table(usage, record.get("calls_by_role", {})))
    console.print(verdict_panel(record["verdict"]["verdict"], record["verdict"]["reasons"]))


def approval(
    console: Console, store: RunStore, record: dict[str, Any], args: argparse.Namespace
) -> int:
    """Decide now (--yes, --approve, --reject, or an interactive prompt) or leave pending."""
    run_id, status = record["run_id"], record["status"]
    if status in (PUBLISHED, REJECTED):
        where = f" to {record['report']}" if status == PUBLISHED else ""
        console.print(f"Run {run_id} was already {status}{where}; nothing to do.")
        return 0
    verdict = record["verdict"]["verdict"]
    decision: bool | None = None
    if args.approve or args.reject:
        decision = bool(args.approve)
    elif args.yes and verdict == "pass":
        decision = True
    elif args.yes:
        console.print(
            f"[yellow]--yes approves only a passing draft; the evaluator voted {verdict}, "
            "so a person must decide.[/]"
        )
    elif sys.stdin.isatty():
        if args.resume:
            console.print(Panel(Markdown(record["draft"]), title=f"Draft of {run_id}"))
            console.print(verdict_panel(verdict, record["verdict"]["reasons"]))
        decision = Confirm.ask(f"Publish report {run_id}?", console=console, default=False)
    if decision is None:
        console.print(
            f"Run [bold]{run_id}[/] is waiting for approval. Decide later with:\n"
            f"  {SCRIPT} --resume {run_id} --approve\n  {SCRIPT} --resume {run_id} --reject"
        )
        return 0
    record, changed = store.decide(run_id, decision)
    if record["status"] == PUBLISHED:
        note = "" if changed else " (it already was: nothing written again)"
        console.print(f"[green]Published[/] {record['report']}{note}")
    else:
        console.print(f"Run {run_id} rejected; nothing published.")
    return 0


def list_runs(console: Console, store: RunStore) -> int:
    pending, stopped = store.pending(), store.interrupted()
    console.print("Waiting for a decision: " + (", ".join(pending) or "none"))
    console.print("Stopped part-way (resumable): " + (", ".join(stopped) or "none"))
    return 0
