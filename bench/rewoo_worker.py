"""Benchmark: the ReWOO worker against sequential and batch-barrier schedulers.

Runs uneven DAGs of sleeping tools (a long branch beside a chain of short steps, two
chains of different speeds, and seeded random layered DAGs of 20 steps with 10-100 ms
latencies) with three schedulers side by side in one run, and reports each one's wall
time over the critical path. Then measures the worker's own cost per step with
zero-latency tools. Prints a markdown table.

    .venv/bin/python bench/rewoo_worker.py [--repeats 5] [--seeds 5]

Targets (the project's performance goals): ours within 5 ms of the critical path on every DAG;
at most 50 us of scheduling per step with zero-latency tools.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from functools import partial

from machine import describe

from agentloops import ReWOOPipeline, ReWOOPlan, ToolRegistry, tool
from agentloops.rewoo._placeholders import substitute
from agentloops.testing import ScriptedModel

WORKERS = 20  # as wide as any plan here, so the critical path is reachable
DEFAULT_WORKERS = 8


@tool
def wait_ms(ms: float, after: str = "") -> str:
    """Sleep for `ms` milliseconds; `after` carries the outputs it depends on."""
    time.sleep(ms / 1000)
    return f"slept {ms:.0f} ms"


@tool
def noop(after: str = "") -> str:
    """Return at once."""
    return "ok"


REGISTRY = ToolRegistry([wait_ms, noop])


# -- DAGs -------------------------------------------------------------------------------


def make_plan(
    latencies: list[float], deps: list[list[int]], tool_name: str = "wait_ms"
) -> ReWOOPlan:
    """A plan whose step i sleeps latencies[i] ms after the steps in deps[i] (0-based)."""
    steps = []
    for i, (ms, ds) in enumerate(zip(latencies, deps, strict=True)):
        ids = [f"#E{d + 1}" for d in ds]
        args: dict[str, object] = {"after": " ".join(ids)}
        if tool_name == "wait_ms":
            args["ms"] = ms
        steps.append(
            {
                "step_id": f"#E{i + 1}",
                "description": f"step {i + 1}",
                "tool_name": tool_name,
                "tool_args": args,
                "depends_on": ids,
            }
        )
    return ReWOOPlan.model_validate({"steps": steps})


def long_beside_chain(long_ms: float = 200, chain: int = 10, short_ms: float = 15) -> ReWOOPlan:
    latencies = [long_ms] + [short_ms] * chain
    deps: list[list[int]] = [[], []] + [[i] for i in range(1, chain)]
    return make_plan(latencies, deps)


def two_chains() -> ReWOOPlan:
    """A slow chain of 5 x 40 ms beside a fast chain of 15 x 10 ms, joined at the end."""
    latencies = [40.0] * 5 + [10.0] * 15 + [10.0]
    deps: list[list[int]] = [[]] + [[i] for i in range(4)]
    deps += [[]] + [[i] for i in range(5, 19)]
    deps += [[4, 19]]
    return make_plan(latencies, deps)


def random_layered(seed: int, n: int = 20, tool_name: str = "wait_ms") -> ReWOOPlan:
    """A seeded random DAG: 3-6 layers; each step after the first layer depends on 1-3
    steps of earlier layers; latencies uniform in 10-100 ms."""
    rng = random.Random(seed)
    layers = rng.randint(3, 6)
    layer_of = sorted([0] * layers + [rng.randrange(layers) for _ in range(n - layers)])
    deps: list[list[int]] = []
    for i, layer in enumerate(layer_of):
        earlier = [j for j in range(i) if layer_of[j] < layer]
        deps.append(sorted(rng.sample(earlier, k=min(len(earlier), rng.randint(1, 3)))))
    latencies = [rng.uniform(10, 100) for _ in range(n)]
    return make_plan(latencies, deps, tool_name)


def critical_path_ms(plan: ReWOOPlan, measured: dict[str, float] | None = None) -> float:
    """The longest dependency path, summing the planned latencies, or with `measured`
    the seconds each tool actually took in one run (sleep overshoots its request)."""
    finish: dict[str, float] = {}
    for step in plan.steps:  # plans here list every dependency before its dependents
        start = max((finish[d] for d in step.depends_on), default=0.0)
        took = measured[step.step_id] * 1000 if measured else float(step.tool_args.get("ms", 0))
        finish[step.step_id] = start + took
    return max(finish.values())


# -- the three schedulers ---------------------------------------------------------------


def _call(step_args: dict[str, object], tool_name: str, outputs: dict[str, str]) -> str:
    return REGISTRY.call(tool_name, substitute(step_args, outputs)).content


def sequential(plan: ReWOOPlan) -> None:
    """One step after another, in plan order."""
    outputs: dict[str, str] = {}
    for step in plan.steps:
        outputs[step.step_id] = _call(step.tool_args, step.tool_name, outputs)


def batch_barrier(plan: ReWOOPlan, pool: ThreadPoolExecutor) -> None:
    """Compute the ready steps, run them all, wait for the whole batch, repeat."""
    outputs: dict[str, str] = {}
    pending = list(plan.steps)
    while pending:
        ready = [s for s in pending if all(d in outputs for d in s.depends_on)]
        futures = {s.step_id: pool.submit(_call, s.tool_args, s.tool_name, outputs) for s in ready}
        wait(futures.values())
        outputs.update((k, f.result()) for k, f in futures.items())
        pending = [s for s in pending if s.step_id not in outputs]


def ours(pipeline: ReWOOPipeline, plan: ReWOOPlan) -> tuple[float, float]:
    """Wall time, and wall time over the critical path of the tools' measured durations
    (the scheduler's own share), both in ms."""
    start = time.perf_counter()
    evidence = pipeline.work(plan)
    wall = (time.perf_counter() - start) * 1000
    return wall, wall - critical_path_ms(plan, {k: o.seconds for k, o in evidence.items()})


def work_many(pipeline: ReWOOPipeline, plan: ReWOOPlan, times: int) -> None:
    for _ in range(times):
        pipeline.work(plan)


def timed(
    fn: Callable[[], object], repeats: int, pick: Callable[[list[float]], float] = statistics.median
) -> float:
    """Wall time in ms over `repeats` runs: the median, or what `pick` takes."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return pick(times)


# -- the report -------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs per DAG for batch-barrier and ours (median)"
    )
    parser.add_argument("--seeds", type=int, default=5, help="random layered DAGs")
    options = parser.parse_args()

    pipeline = ReWOOPipeline(ScriptedModel([]), REGISTRY, max_workers=WORKERS, max_plan_steps=1000)
    dags = [("long 200 ms beside a chain of 10 x 15 ms", long_beside_chain())]
    dags.append(("slow chain 5 x 40 ms beside fast chain 15 x 10 ms", two_chains()))
    dags += [
        (f"random layered, 20 steps, seed {s}", random_layered(s)) for s in range(options.seeds)
    ]

    print(describe())
    print(
        f"thread pools of {WORKERS} workers; sequential: 1 run, batch-barrier and ours: "
        f"median of {options.repeats} runs per DAG\n"
    )
    print(
        "| DAG | steps | critical path (ms) | sequential | batch-barrier | ours "
        "| ours - critical path (ms) | ours - measured critical path (ms) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = worst_own = 0.0
    start = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        for name, plan in dags:
            cp = critical_path_ms(plan)
            seq = timed(partial(sequential, plan), 1)  # slow and steady: one run is enough
            bar = timed(partial(batch_barrier, plan, pool), options.repeats)
            samples = [ours(pipeline, plan) for _ in range(options.repeats)]
            our = statistics.median(wall for wall, _ in samples)
            own = statistics.median(over for _, over in samples)
            worst, worst_own = max(worst, our - cp), max(worst_own, own)
            print(
                f"| {name} | {len(plan.steps)} | {cp:.1f} | {seq / cp:.2f}x ({seq:.0f} ms) "
                f"| {bar / cp:.2f}x ({bar:.0f} ms) | {our / cp:.2f}x ({our:.0f} ms) "
                f"| {our - cp:+.1f} | {own:+.1f} |"
            )
    print(
        f"\nworst of ours over the planned critical path: {worst:+.1f} ms; over the measured "
        f"critical path: {worst_own:+.1f} ms (target <= 5 ms)"
    )

    print("\nZero-latency tools: the worker's own cost per step (validation, substitution,")
    print(f"dispatch, the registry call), default pool of {DEFAULT_WORKERS}; best of 5:\n")
    print("| plan | runs | us/step |")
    print("|---|---:|---:|")
    lean = ReWOOPipeline(ScriptedModel([]), REGISTRY, max_plan_steps=1000)
    for n, reps in ((20, 200), (200, 20), (1000, 4)):
        plan = random_layered(0, n=n, tool_name="noop")
        lean.work(plan)  # warm up: threads started, caches filled
        total_ms = timed(partial(work_many, lean, plan, reps), 5, min)
        print(f"| random layered, {n} steps | {reps} | {total_ms * 1000 / (reps * n):.1f} |")
    print("\ntarget: <= 50 us/step")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nbenchmark took {time.perf_counter() - start:.1f} s; load average at the end: {load}")


if __name__ == "__main__":
    main()
