"""The command line's flags: what each does, and the checks on them before anything runs.

`parse_args` refuses contradictions (a decision without `--resume`, `--port` without
`--web`, a blank request) with argparse's usage message and exit status 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import get_args

from market_analyst import browse
from market_analyst.journal import LEASE_TTL
from market_analyst.memory import Profile

SCRIPT = Path(__file__).resolve().parents[1] / "market_analyst.py"
STATE_DIR, REPORTS_DIR = Path(".agentloops"), Path("reports")


def command(*argv: str) -> str:
    """This script's command line, as it works pasted into a shell here: the interpreter
    running now and the script, each relative to the current directory when it lies under
    it (from the repository's root: `.venv/bin/python examples/market_analyst.py`), else
    absolute; then `argv`, quoted."""
    here = Path.cwd().resolve()

    def shown(path: Path) -> str:
        absolute = path if path.is_absolute() else here / path
        if not absolute.is_relative_to(here):
            return str(absolute)
        relative = str(absolute.relative_to(here))
        return relative if "/" in relative else f"./{relative}"  # never looked up on PATH

    program = [shown(Path(sys.executable)), shown(SCRIPT)]
    return " ".join(shlex.quote(part) for part in [*program, *argv])


def command_for(args: argparse.Namespace, *argv: str) -> str:
    """`command(*argv)` with this run's state and reports directories, when moved."""
    moved = []
    if args.state_dir != STATE_DIR:
        moved += ["--state-dir", str(args.state_dir)]
    if args.reports_dir != REPORTS_DIR:
        moved += ["--reports-dir", str(args.reports_dir)]
    return command(*argv, *moved)


def _not_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _seconds(text: str) -> float:
    value = _not_negative(text)
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and under a day, got {text}")
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
        prog=command(),
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
    model.add_argument(
        "--context-window",
        type=_positive_int,
        metavar="TOKENS",
        help="the model's context window: compact what it sees to stay within it",
    )
    model.add_argument(
        "--timeout",
        type=_positive_int,
        metavar="SECONDS",
        help="the longest one model call may take",
    )
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
    look.add_argument(
        "--auto-approve-usd",
        type=_not_negative,
        metavar="USD",
        help="trades worth up to this go through without asking (default 1000)",
    )
    look.add_argument(
        "--hard-limit-usd",
        type=_not_negative,
        metavar="USD",
        help="trades worth more than this are refused (default 10000)",
    )
    look.add_argument(
        "--trade-tickers", metavar="T,...", help='the tickers that may be traded ("" = any)'
    )
    trade = p.add_argument_group("trades (simulated: a line in a local ledger, no broker)")
    trade.add_argument(
        "--trade",
        action="store_true",
        help="propose a trade once the report is published (or with --resume RUN_ID of a "
        "published report)",
    )
    trade.add_argument(
        "--budget", type=_not_negative, metavar="USD", help="with --trade: about how much"
    )
    trade.add_argument("--trades", action="store_true", help="list trade proposals")
    trade_decision = trade.add_mutually_exclusive_group()
    trade_decision.add_argument("--approve-trade", metavar="TRADE_ID", help="run a waiting trade")
    trade_decision.add_argument("--deny-trade", metavar="TRADE_ID", help="deny a waiting trade")
    data = p.add_argument_group("data")
    data.add_argument(
        "--live",
        action="store_true",
        help="live market data from Yahoo Finance (the `live` extra; needs internet) instead "
        "of the fixtures",
    )
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
    p.add_argument(
        "--lease-ttl",
        type=_seconds,
        default=LEASE_TTL,
        metavar="SECONDS",
        help="how long this process's hold on a run lasts without renewal: a run whose "
        f"process crashed can be taken over this long after (default {LEASE_TTL:g})",
    )
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
    if args.budget is not None and not args.trade:
        p.error("--budget goes with --trade")
    if args.trade and not (args.request or args.resume):
        p.error("--trade needs a request, or --resume RUN_ID of a published report")
    if not (
        args.web
        or args.request
        or args.resume
        or args.list
        or args.show
        or args.reports
        or args.search is not None
        or args.profile
        or args.trades
        or args.approve_trade
        or args.deny_trade
    ):
        p.error(
            "give a request, --resume RUN_ID, --list, --show, --reports, --search, --profile, "
            "--trades, --approve-trade TRADE_ID or --web"
        )
    return args
