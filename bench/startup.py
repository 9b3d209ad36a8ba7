"""Import cost and install size: `import agentloops` against pydantic (its floor) and peers.

Every sample is a fresh interpreter that times its own import statement and reports its
peak RSS; cases are interleaved round by round and the median is kept. The same child
run lists the heavy modules `import agentloops` left in `sys.modules`: provider SDKs
and optional backends must load only when their client or feature is built. Then the
installed size of a core install (pydantic, httpx and what they pull in) against one
with the `anthropic` extra, summed from the installed files of each dependency closure.

    .venv/bin/python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import importlib.metadata
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
    "pydantic": ("import pydantic", "pydantic"),
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
TARGET_MS, TARGET_MB, TARGET_RATIO = 100.0, 40.0, 1.8
FLOOR = "pydantic (BaseModel)"
"""What `import agentloops` cannot go below: its records and tools are pydantic models.
(A bare `import pydantic` loads almost nothing: pydantic resolves its names lazily.)"""
DISTRIBUTION = "agentloops-kit"
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


def requirements(dist: str, extras: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
    """The distributions `dist` (with `extras`) requires on this interpreter, with theirs."""
    from packaging.requirements import Requirement

    found = []
    for line in importlib.metadata.requires(dist) or []:
        req = Requirement(line)
        wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in wanted):
            found.append((req.name, frozenset(req.extras)))
    return found


def closure(extras: frozenset[str]) -> dict[str, tuple[int, int, int]]:
    """Per distribution that `agentloops-kit[extras]` pulls in (itself excluded): its
    installed files' bytes, their disk use (whole blocks) and their number."""
    sizes: dict[str, tuple[int, int, int]] = {}
    todo, seen = [(DISTRIBUTION, extras)], set()
    while todo:
        name, wanted = todo.pop()
        dist = importlib.metadata.distribution(name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        if key != DISTRIBUTION:  # a self-reference, as in the dev extra, adds only extras
            stats = [os.stat(f) for f in (f.locate() for f in dist.files or []) if f.is_file()]
            sizes[key] = (
                sum(st.st_size for st in stats),
                sum(st.st_blocks * 512 for st in stats),
                len(stats),
            )
        todo += requirements(name, wanted)
    return sizes


def install_sizes() -> None:
    """Print the core install against one with the anthropic extra, side by side."""
    try:
        core, sdk = closure(frozenset()), closure(frozenset({"anthropic"}))
    except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError) as exc:
        print(f"\ninstall sizes skipped: {exc} (needs `pip install -e '.[dev]'`)")
        return
    mb = 1024 * 1024

    def total(sizes: dict[str, tuple[int, int, int]], i: int) -> int:
        return sum(v[i] for v in sizes.values())

    print(
        "\n| install | distributions | files | installed bytes (MB) | disk use (MB) |"
        "\n|---|---|---|---|---|"
    )
    for label, sizes in ((f"`{DISTRIBUTION}` (core)", core), (f"`{DISTRIBUTION}[anthropic]`", sdk)):
        print(
            f"| {label} | {len(sizes)} | {total(sizes, 2):,} | {total(sizes, 0) / mb:,.1f} "
            f"({total(sizes, 0) / total(core, 0):.1f}x) | {total(sizes, 1) / mb:,.1f} |"
        )
    extra = sorted(set(sdk) - set(core), key=lambda k: -sdk[k][0])
    print(
        "\nthe anthropic extra adds: "
        + ", ".join(f"{k} {sdk[k][0] / mb:,.1f} MB" for k in extra)
        + "\n(the installed files of each distribution, byte-code included, agentloops itself"
        " left out; disk use counts whole file-system blocks)"
    )


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
    floor = median(FLOOR, "import_ms")
    ratio = al_median / floor
    print(
        f"| `import agentloops` over `{CASES[FLOOR][0]}`, medians | {al_median:,.0f} / "
        f"{floor:,.0f} ms = {ratio:.2f}x | <= {TARGET_RATIO}x | "
        f"{'yes' if ratio <= TARGET_RATIO else '**no**'} |"
    )
    print(f"\nchecked for: {', '.join(HEAVY)}")
    print(
        f"pydantic ({CASES[FLOOR][0]}), median: {floor:,.0f} ms of the {al_median:,.0f} ms; "
        "it is a core dependency."
    )
    install_sizes()


if __name__ == "__main__":
    main()
