"""ReAct, ReWOO and Plan-and-Execute side by side on the Market Analyst's tasks, offline.

    .venv/bin/python examples/compare_loops.py [--out compare-out]

writes `compare_results.md` and `img/compare.png` into the output folder (the same layout
as docs/, whose copies are made this way), printing each attempt as it finishes. It never
overwrites a file that git tracks. Every loop gets the same tools, tasks and
fresh-context evaluator. The model is the example's deterministic stand-in and the tool
latencies are simulated, so the table shows how the loops differ in shape (model calls,
tokens, wall time, what happens on a tool error), not how well a real model reasons.
Needs the `examples` extra (rich); the chart also needs the `chart` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from market_analyst import data, facts, tools, writers
from market_analyst.demo_model import DemoModel
from market_analyst.workflow import CRITERIA

from agentloops import (
    Attempt,
    Comparison,
    Evaluator,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    compare,
)

TASKS = [
    "Quick snapshot of NVDA",
    "Quick snapshot of AMD and INTC",
    "Investment thesis and strategic risks for MSFT",
    "Quick snapshot of XYZ",  # not in the fixture set: every look-up fails
]
REACT_SYSTEM = (
    "You are the analyst of a ReAct agent.\n"
    "Answer the request with the tools; state only figures the tools returned."
)
READING = """\
## How to read it

The stand-in model answers every role by fixed rules, so every loop gets every task right
here, and the costs show each loop's shape rather than a model's quality:

- **ReAct** (as the stand-in plays it) makes one look-up per turn and decides the next
  after each result: one model call per tool call plus the answer, with the history
  growing each turn (mostly cache reads once the prefix is cached).
- **ReWOO** plans every look-up in one call, runs them in parallel, and writes the answer
  in a second call: two model calls whatever the number of tools, and the shortest wall
  time because the simulated latencies overlap.
- **Plan-and-Execute** plans four steps, runs each as a small ReAct loop (a call to act,
  a call to report its findings), then reports: the most calls, and steps run one after
  another.
- The unknown ticker (XYZ) makes every look-up fail; every loop still answers correctly
  that there is no data, and the evaluator asks for a person (`needs_human`).

Token counts are estimates (four characters a token) with a simulated prompt cache: a
request whose prefix was sent before reads it from the cache. With a real model, run the
same comparison with your client in place of `DemoModel` (see
[Comparing loops](compare.md)).
"""
NOTE = (
    "Measured offline with the deterministic stand-in model (not a language model) and "
    "simulated tool latencies (scale {latency}); {trials} trials of {tasks} tasks per loop."
)


def checker(task: str, answer: str) -> bool:
    """The ground truth: each named ticker's fixture price (and, for an analysis, its
    latest revenue and the risks); for an unknown ticker, no figures at all."""
    named = writers.tickers_in(task)
    if any(t not in data.TICKERS for t in named):
        return not facts.numbers(answer) and all(t in answer for t in named)
    expected = [str(data.snapshot(t)["price"]) for t in named]
    if writers.route(task)["route"] == writers.DEEP:
        expected += [str(data.financials(t)["fiscal_years"][0]["revenue_b"]) for t in named]
    risks_named = "risk" in answer.lower() or writers.route(task)["route"] == writers.FLASH
    return risks_named and all(e in answer for e in expected)


LOOPS = {
    "ReAct": lambda on_event: ReActLoop(
        DemoModel(), tools.RESEARCH_TOOLS, system=REACT_SYSTEM, max_steps=12, on_event=on_event
    ),
    "ReWOO": lambda on_event: ReWOOPipeline(DemoModel(), tools.RESEARCH_TOOLS, on_event=on_event),
    "Plan-and-Execute": lambda on_event: PlanAndExecute(
        DemoModel(), tools.RESEARCH_TOOLS, on_event=on_event
    ),
}


def run(
    *, latency: float, trials: int, on_attempt: Callable[[Attempt], None] | None = None
) -> Comparison:
    tools.configure(latency_scale=latency)
    return compare(
        LOOPS,
        TASKS,
        checker=checker,
        trials=trials,
        evaluator=Evaluator(DemoModel(), criteria=CRITERIA),
        on_attempt=on_attempt,
    )


def tracked(paths: list[Path]) -> list[Path]:
    """Those of `paths` that exist and that git tracks (none outside a git work tree)."""
    existing = [path.resolve() for path in paths if path.exists()]
    if not existing:
        return []
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--full-name", "--", *map(str, existing)],
            cwd=existing[0].parent,
            capture_output=True,
            text=True,
            check=False,
        )
        root = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=existing[0].parent,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no git on this machine: nothing can be tracked
        return []
    if listed.returncode or root.returncode:  # not inside a git work tree
        return []
    top = Path(root.stdout.strip())
    return [top / line for line in listed.stdout.splitlines()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--latency", type=float, default=0.3, help="simulated latency scale")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument(
        "--out", type=Path, default=Path("compare-out"), help="output folder (compare-out/)"
    )
    args = p.parse_args(argv)
    results, chart = args.out / "compare_results.md", args.out / "img" / "compare.png"
    if kept := tracked([results, chart]):
        names = ", ".join(str(path) for path in kept)
        print(f"Not overwriting files git tracks ({names}): pick another --out.", file=sys.stderr)
        return 2
    note = NOTE.format(latency=args.latency, trials=args.trials, tasks=len(TASKS))
    print(f"Offline comparison. {note}\n", flush=True)
    total, done = len(LOOPS) * len(TASKS) * args.trials, 0

    def progress(attempt: Attempt) -> None:
        nonlocal done
        done += 1
        outcome = "right" if attempt.success else (attempt.error or "wrong")
        print(
            f"[{done:>2}/{total}] {attempt.loop:<16} {attempt.task:<48} "
            f"{outcome}, {attempt.model_calls} model calls, {attempt.seconds:.2f} s",
            flush=True,
        )

    comparison = run(latency=args.latency, trials=args.trials, on_attempt=progress)
    table = comparison.table()
    print(f"\n{table}")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        chart.parent.mkdir(exist_ok=True)
        wrote = [comparison.chart(chart)]
        figure = "![comparison chart](img/compare.png)\n\n"
    except ImportError as exc:  # matplotlib is optional: the table is the result
        print(f"\nNo chart: {exc}")
        wrote, figure = [], ""
    tasks = "\n".join(f"- {t}" for t in TASKS)
    results.write_text(
        "# Loop comparison on the Market Analyst tasks\n\n"
        f"> {note} Made with `.venv/bin/python examples/compare_loops.py`.\n\n"
        f"Tasks:\n\n{tasks}\n\n{table}\n\n{figure}{READING}\n",
        encoding="utf-8",
    )
    print(f"\nWrote {', '.join(str(path) for path in [results, *wrote])}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
