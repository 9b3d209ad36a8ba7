"""Import cost: `import agentloops` against a bare interpreter, pydantic alone, and the peers.

Every sample is a fresh interpreter that times its own import statement and reports its
peak RSS; cases are interleaved round by round and the median is kept. The same child
run lists the heavy modules `import agentloops` left in `sys.modules`: provider SDKs
and optional backends must load only when their client or feature is built.

    python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from machine import describe

# What a program that defines one tool pays: the tool builds its pydantic argument model.
ONE_TOOL = "import agentloops\ndef add(a: int, b: int) -> int: return a + b\nagentloops.tool(add)"
CASES = {
    "bare interpreter": ("pass", None),
    "pydantic (BaseModel)": ("from pydantic import BaseModel", "pydantic"),
    "pydantic (BaseModel, Field)": ("from pydantic import BaseModel, Field", "pydantic"),
    "agentloops": ("import agentloops", "agentloops"),
    "agentloops and one tool": (ONE_TOOL, "agentloops"),
    "all three loops": (
        "from agentloops import PlanAndExecute, ReActLoop, ReWOOPipeline",
        "agentloops",
    ),
    "langgraph (StateGraph)": ("from langgraph.graph import StateGraph", "langgraph"),
    "langchain create_agent": ("from langchain.agents import create_agent", "langchain"),
    "pydantic-ai (Agent)": ("from pydantic_ai import Agent", "pydantic_ai"),
}
HEAVY = (
    "anthropic",
    "httpx",
    "httpcore",
    "openai",
    "opentelemetry",
    "distributed",
    "dask",
    "numpy",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "matplotlib",
    "importlib.metadata",
)
"""Modules `import agentloops` must not load: provider SDKs, optional backends, peers, and
`importlib.metadata`, which pydantic loads to scan for plugins when a model's schema is
built, so its presence means some module builds a schema at import (use defer_build)."""
TARGET_MS, TARGET_MB = 150.0, 40.0
PEERS = ("langgraph", "langchain", "pydantic_ai")
PEER_RUNS = 3  # their imports take a second each

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
{statement}
seconds = time.perf_counter() - start
heavy = sorted(set(sys.modules) & set({heavy!r}))
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"import_ms": seconds * 1e3, "rss_mb": rss_kb / 1024, "heavy": heavy}}))
"""


# Byte-code is cached as after a pip install: some machines set PYTHONDONTWRITEBYTECODE,
# which would make every child compile the (editable) package from source again.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def sample(statement: str) -> dict[str, object]:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(statement=statement, heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    result: dict[str, object] = json.loads(out.stdout)
    result["process_ms"] = (time.perf_counter() - start) * 1e3
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="rounds (peers: at most 3)")
    args = parser.parse_args()
    cases = {}
    for name, (statement, module) in CASES.items():
        if module is None or importlib.util.find_spec(module) is not None:
            cases[name] = statement
        else:
            print(f"skip {name}: {module} is not installed (pip install -e '.[bench]')")
    print(describe(), "\n")
    for statement in cases.values():
        sample(statement)  # warm the file cache and byte-code
    samples: dict[str, list[dict[str, object]]] = {name: [] for name in cases}
    for i in range(args.runs):
        for name, statement in cases.items():
            if i < PEER_RUNS or CASES[name][1] not in PEERS:
                samples[name].append(sample(statement))

    def median(name: str, key: str) -> float:
        return statistics.median(float(s[key]) for s in samples[name])

    def best(name: str) -> float:
        return min(float(s["import_ms"]) for s in samples[name])

    bare_ms, bare_mb = (
        median("bare interpreter", "process_ms"),
        median("bare interpreter", "rss_mb"),
    )
    print(
        "| import | import time, best / median (ms) | whole process, median (ms) "
        "| peak RSS (MB) | RSS over bare (MB) |"
    )
    print("|---|---|---|---|---|")
    for name, statement in cases.items():
        print(
            f"| `{statement.replace(chr(10), '; ')}` | {best(name):,.0f} / "
            f"{median(name, 'import_ms'):,.0f} (n={len(samples[name])}) | "
            f"{median(name, 'process_ms'):,.0f} | {median(name, 'rss_mb'):,.1f} | "
            f"{median(name, 'rss_mb') - bare_mb:+,.1f} |"
        )
    print(
        f"\nfresh interpreters, rounds interleaved; bare process {bare_ms:,.0f} ms "
        "(the machine's speed at the time: about 24 ms when this shared machine is quiet)."
    )
    al_ms, al_median = best("agentloops"), median("agentloops", "import_ms")
    al_mb = median("agentloops", "rss_mb")
    heavy = sorted({m for s in samples["agentloops"] for m in s["heavy"]})
    print("\n| check | measured | target | met |\n|---|---|---|---|")
    print(
        f"| `import agentloops` time, best (median) | {al_ms:,.0f} ms ({al_median:,.0f} ms) "
        f"| < {TARGET_MS:.0f} ms | "
        f"{'yes' if al_ms < TARGET_MS else '**no**'} |"
    )
    print(
        f"| `import agentloops` peak RSS | {al_mb:,.1f} MB | < {TARGET_MB:.0f} MB | "
        f"{'yes' if al_mb < TARGET_MB else '**no**'} |"
    )
    print(
        f"| heavy modules after `import agentloops` | {', '.join(heavy) or 'none'} | none | "
        f"{'**no**' if heavy else 'yes'} |"
    )
    print(f"\nchecked for: {', '.join(HEAVY)}")
    print(
        f"pydantic (BaseModel), best: {best('pydantic (BaseModel)'):,.0f} ms of the "
        f"{al_ms:,.0f} ms; it is a core dependency."
    )


if __name__ == "__main__":
    main()
