"""ReAct, ReWOO and Plan-and-Execute side by side on the Market Analyst's tasks, offline.

    python examples/compare_loops.py   # writes docs/compare_results.md, docs/img/compare.png

Every loop gets the same tools, tasks and fresh-context evaluator. The model is the
example's deterministic stand-in and the tool latencies are simulated, so the table
shows how the loops differ in shape (model calls, tokens, wall time, what happens on a
tool error), not how well a real model reasons. Needs `agentloops[examples]`
(rich and matplotlib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from market_analyst import data, facts, tools, writers
from market_analyst.demo_model import DemoModel
from market_analyst.workflow import CRITERIA

from agentloops import (
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


def run(*, latency: float, trials: int) -> Comparison:
    tools.configure(latency_scale=latency)
    return compare(
        LOOPS,
        TASKS,
        checker=checker,
        trials=trials,
        evaluator=Evaluator(DemoModel(), criteria=CRITERIA),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--latency", type=float, default=0.3, help="simulated latency scale")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--out-dir", type=Path, default=Path("docs"), help="where results go")
    args = p.parse_args(argv)
    note = NOTE.format(latency=args.latency, trials=args.trials, tasks=len(TASKS))
    print(f"Offline comparison. {note}\n", flush=True)
    comparison = run(latency=args.latency, trials=args.trials)
    table = comparison.table()
    print(table)
    (args.out_dir / "img").mkdir(parents=True, exist_ok=True)
    chart = comparison.chart(args.out_dir / "img" / "compare.png")
    results = args.out_dir / "compare_results.md"
    tasks = "\n".join(f"- {t}" for t in TASKS)
    results.write_text(
        "# Loop comparison on the Market Analyst tasks\n\n"
        f"> {note} Regenerate with `python examples/compare_loops.py`.\n\n"
        f"Tasks:\n\n{tasks}\n\n{table}\n\n![comparison chart](img/compare.png)\n\n"
        f"{READING}\n",
        encoding="utf-8",
    )
    print(f"\nWrote {results} and {chart}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
