"""What a durable run's journal checks cost beside the work they guard, side by side in one
run: per ReAct step, sealing its records into the checksum chain against the whole durable
step; per record on resume, checking the chain and the schemas against the store's read and
against the whole resume.

A ReAct run of N steps (bench/react_overhead.py's zero-latency model and trivial tool) is
journaled on each store; then, in interleaved rounds, this process's CPU time of: the run
itself (per step), sealing each step's records again (`Chain.seal`, per step), reading the
journal (`store.read`, per record), checking it (`_records.checked` with its chain, per
record), and resuming the finished run (read, check, replay; per record). CPU time, not
wall: a busy machine inflates both, but wall time more; medians over the rounds.

`--public` measures only the run and the resume, through the public API, so the same
script measures a tree from before the checks too (its `agentloops` first on the path):

    cd bench && python journal_checks.py [--steps 1000] [--rounds 5]
    mkdir /tmp/main && git archive main | tar -x -C /tmp/main
    for t in /tmp/main ..; do PYTHONPATH=$t python journal_checks.py --public; done
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from machine import describe
from react_overhead import ZeroLatencyModel, add, agentloops_script

import agentloops
from agentloops import ReActLoop
from agentloops.journal import MemoryStore, RunStore, SQLiteStore


def cpu_us(fn: Callable[[], object], per: int) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return (time.process_time() - start) / per * 1e6


def measure(store: RunStore, steps: int, round_: int, public: bool) -> dict[str, float]:
    run_id = f"r{round_}"
    loop = ReActLoop(
        ZeroLatencyModel(agentloops_script(steps)), [add], store=store, max_steps=steps + 5
    )
    step = cpu_us(lambda: loop.run("go", run_id=run_id), steps)
    records = store.read(run_id)
    n = len(records)
    resume = ReActLoop(ZeroLatencyModel([]), [add], store=store, max_steps=steps + 5)
    figures = {"durable step": step, "resume, per record": cpu_us(lambda: resume.resume(run_id), n)}
    if public:
        return figures
    from agentloops.engine._chain import FIELD, Chain
    from agentloops.engine._records import checked

    meta = store.run_info(run_id).meta
    entries = [(r.kind, {k: v for k, v in r.data.items() if k != FIELD}, r.key) for r in records]

    def seal() -> None:
        chain = Chain(run_id, meta["nonce"])
        for i in range(0, len(entries), 3):  # a step's records: a reply and a call's two
            chain.seal(entries[i : i + 3])

    return figures | {
        "seal, per step": cpu_us(seal, steps),
        "read, per record": cpu_us(lambda: store.read(run_id), n),
        "check, per record": cpu_us(lambda: checked(records, Chain.of(run_id, meta)), n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--public", action="store_true", help="the run and the resume only")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    stores: dict[str, Callable[[int], RunStore]] = {
        "MemoryStore": lambda r: MemoryStore(),
        'SQLiteStore(synchronous="NORMAL")': lambda r: SQLiteStore(
            tmp / f"{r}.db", synchronous="NORMAL"
        ),
    }
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in stores}
    for round_ in range(args.rounds):
        for name, make in stores.items():
            samples[name].append(measure(make(round_), args.steps, round_, args.public))
    print(describe())
    print(f"agentloops from {Path(agentloops.__file__).parent}")
    print(f"{args.steps} steps, {args.rounds} rounds; CPU us, medians")
    for name, rows in samples.items():
        medians = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
        print(name, json.dumps(medians))


if __name__ == "__main__":
    main()
