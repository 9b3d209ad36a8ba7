"""Durable runs in real processes, for tests/test_durable_faults.py.

    python tests/_durable_worker.py sqlite /path/to/runs.db
    python tests/_durable_worker.py postgres "host=... dbname=..."

A zygote: it imports everything once, prints `{"ready": pid}`, then serves one JSON command
per line on stdin, answering each with one JSON line:

- `{"op": "spawn", "job": {...}}` forks a child that runs the job (see `run_job`) and
  writes its outcome as JSON to `job["out"]`; the answer is `{"pid": ...}`.
- `{"op": "wait", "pid": ..., "timeout": ...}` waits for that child to end: `{"code": n}`
  when it exited, `{"signal": n}` when a signal killed it.

A fork is a fresh process (no loop, store, model or lease carries over; each child opens
its own store) that starts in milliseconds, so a test can kill and resume many runs. The
zygote runs every loop once before it serves (on a throwaway SQLite file), so the children
start with everything imported and built.

Every loop here is built deterministically: its models are `FunctionModel`s that answer
from the request alone, so a run and its resumption in another process see the same
replies. Its tools change a ledger file (JSON lines) and dedupe by their idempotency key:
under an exclusive lock each reads the ledger and appends its key unless it is there. Every
time a tool body or a model runs, a line goes to the job's `log`, so a test can count what
ran where. A job can SIGKILL its own process at the Nth journal write (just before the
store is asked, or just after it answered) or at the Nth tool call (before or after the
ledger append).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import pydantic

from agentloops import (
    CallInDoubt,
    Message,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    OutputContext,
    PlanAndExecute,
    ReActLoop,
    ReWOOPipeline,
    RunLeased,
    ToolCall,
    Usage,
    idempotency_key,
    tool,
)
from agentloops.journal import PostgresStore, RunStore, SQLiteStore
from agentloops.messages import message_to_dict
from agentloops.testing import FunctionModel, respond, respond_structured

TASK = "Settle the accounts."
PAY_TASK = "Pay the invoice."
LOOPS = ("react", "rewoo", "pe", "typed")
USAGE = Usage(input_tokens=10, output_tokens=5)


# -- what a job does ------------------------------------------------------------------------


class Job:
    """One child's settings (see the module doc) and its counters."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.kill: dict[str, Any] | None = spec.get("kill")
        self.writes: list[int] = []
        """Records per journal write, in order."""
        self.tool_calls = itertools.count(1)
        self.lock = threading.Lock()

    def log(self, **line: Any) -> None:
        # One write(2) of one line, O_APPEND: whole lines from every process and thread.
        data = (json.dumps({**line, "pid": os.getpid()}) + "\n").encode()
        fd = os.open(self.spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def die_at(self, at: str, n: int, when: str) -> None:
        kill = self.kill
        if kill and (kill["at"], kill["n"], kill["when"]) == (at, n, when):
            self.log(event="killed", at=at, n=n, when=when)
            os.kill(os.getpid(), signal.SIGKILL)


class Counting:
    """The store, with each journal write counted (and the job killed where it says)."""

    def __init__(self, store: RunStore, job: Job):
        self._store = store
        self._job = job

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append_many(self, lease: Any, entries: Any, **options: Any) -> Any:
        n = self._count(len(entries))  # its size: milestones vary it
        written = self._store.append_many(lease, entries, **options)
        self._job.die_at("write", n, "after")
        return written

    # The engine's own path for a run's records (encoded once; SQLite's group commit under
    # asyncio): counted, and killed at, the same way.
    _takes_records = True

    def _count(self, records: int) -> int:
        job = self._job
        with job.lock:
            job.writes.append(records)
            n = len(job.writes)
        job.log(event="write", n=n, records=records)
        job.die_at("write", n, "before")
        return n

    def _append_records(self, lease: Any, new: Any, after: Any, status: Any) -> int:
        n = self._count(len(new))
        seq: int = self._store._append_records(lease, new, after, status)  # type: ignore[attr-defined]
        self._job.die_at("write", n, "after")
        return seq

    async def _aappend_records(self, lease: Any, new: Any, after: Any, status: Any) -> int:
        n = self._count(len(new))
        seq: int = await self._store._aappend_records(lease, new, after, status)  # type: ignore[attr-defined]
        self._job.die_at("write", n, "after")
        return seq


def ledger_tool(job: Job, name: str, **options: Any) -> Any:
    """A side-effecting tool that appends `{key, tool, item}` to the ledger, once per key."""

    def body(item: str) -> str:
        key = idempotency_key()
        n = next(job.tool_calls)
        job.log(event="tool", tool=name, key=key, n=n)
        stall = job.spec.get("stall")
        if stall and stall["n"] == n:  # wait here (to be SIGSTOPped) until told to go on
            open(stall["marker"], "w").close()
            while not os.path.exists(stall["go"]):
                time.sleep(0.01)
        if n == 1 and job.spec.get("slow"):  # hold the run a while (the race tests)
            time.sleep(job.spec["slow"])
        job.die_at("tool", n, "before")
        with open(job.spec["ledger"], "a+") as ledger:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            ledger.seek(0)
            if not any(json.loads(line)["key"] == key for line in ledger):
                ledger.write(json.dumps({"key": key, "tool": name, "item": item}) + "\n")
                ledger.flush()  # in the kernel's hands: a SIGKILL cannot lose it
        job.die_at("tool", n, "after")
        return f"{name} {item}: ok"

    body.__name__ = name
    body.__doc__ = f"{name.title()} an item."
    return tool(body, name=name, read_only=False, **options)


def tools(job: Job) -> list[Any]:
    return [
        ledger_tool(job, "credit", on_doubt="rerun"),  # dedupes by key: safe to run again
        ledger_tool(job, "debit"),  # the default for a side effect: ask a person
        ledger_tool(job, "pay", requires_approval=True),
    ]


def model(job: Job, role: str, answer: Callable[[ModelRequest], ModelResponse]) -> FunctionModel:
    def logged(request: ModelRequest) -> ModelResponse:
        job.log(event="model", role=role)
        return answer(request)

    return FunctionModel(logged)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def results_of(messages: list[Message]) -> list[str]:
    return [r.content for m in messages for r in m.tool_results]


# -- the three loops, each with a scenario that changes the ledger ------------------------------


def react_reply(request: ModelRequest) -> ModelResponse:
    """Two parallel calls, then one whose arguments come from their results, then an answer;
    or (the "approval" task) a payment that needs approval, then an answer."""
    turns = sum(m.role == "assistant" for m in request.messages)
    seen = results_of(request.messages)
    if request.messages[0].text.startswith("Pay"):
        if turns == 0:
            return _calls(ToolCall("p1", "pay", {"item": "invoice-7"}))
        return respond(f"paid: {seen}", usage=USAGE)
    if turns == 0:
        return _calls(
            ToolCall("c1", "credit", {"item": "a"}), ToolCall("c2", "debit", {"item": "b"})
        )
    if turns == 1:
        return _calls(ToolCall("c3", "credit", {"item": digest("|".join(seen))}))
    return respond(f"done: {digest('|'.join(seen))}", usage=USAGE)


def _calls(*calls: ToolCall) -> ModelResponse:
    return ModelResponse(Message("assistant", calls), "tool_use", USAGE, "scripted")


REWOO_PLAN = {
    "steps": [
        {"step_id": "#E1", "description": "a", "tool_name": "credit", "tool_args": {"item": "a"}},
        {"step_id": "#E2", "description": "b", "tool_name": "debit", "tool_args": {"item": "#E1"}},
        {"step_id": "#E3", "description": "c", "tool_name": "credit", "tool_args": {"item": "c"}},
        {
            "step_id": "#E4",
            "description": "d",
            "tool_name": "debit",
            "tool_args": {"item": "#E2 and #E3"},
        },
    ]
}


def rewoo_planner(request: ModelRequest) -> ModelResponse:
    if request.output is not None:
        return respond_structured(REWOO_PLAN, usage=USAGE)
    return respond(f"solved: {digest(request.messages[-1].text)}", usage=USAGE)


STEP = re.compile(r"Your step \((\d+) of \d+\): (\w+) (\S+)")


def pe_planner(request: ModelRequest) -> ModelResponse:
    if request.messages[0].text.startswith("Task: Pay"):
        steps = ["pay invoice-7"]
    else:
        steps = ["credit a", "debit b", "credit c"]
    plan = {"steps": [{"step_number": i, "description": d} for i, d in enumerate(steps, 1)]}
    return respond_structured(plan, usage=USAGE)


def pe_executor(request: ModelRequest) -> ModelResponse:
    """Each step: one call of the tool its description names, then a finding."""
    found = STEP.search(request.messages[0].text)
    assert found is not None, request.messages[0].text
    number, name, item = found.groups()
    seen = results_of(request.messages)
    if not seen:
        return _calls(ToolCall(f"s{number}", name, {"item": item}))
    return respond(f"step {number} found {digest('|'.join(seen))}", usage=USAGE)


def pe_reporter(request: ModelRequest) -> ModelResponse:
    return respond(f"report: {digest(request.messages[-1].text)}", usage=USAGE)


# -- a typed ReAct run: a tool that asks for a retry, an answer the validator sends back --------


class Settled(pydantic.BaseModel):
    digest: str
    items: int


def typed_reply(request: ModelRequest) -> ModelResponse:
    """A credit and a look-up that asks for the English name; the look-up again; an answer
    the validator rejects (it counts one item); the answer it accepts."""
    turns = sum(m.role == "assistant" for m in request.messages)
    seen = results_of(request.messages)
    if turns == 0:
        return _calls(
            ToolCall("t1", "credit", {"item": "a"}), ToolCall("t2", "lookup", {"city": "Köln"})
        )
    if turns == 1:
        return _calls(ToolCall("t3", "lookup", {"city": "Cologne"}))
    answer = {"digest": digest("|".join(seen)), "items": 1 if turns == 2 else 2}
    return respond_structured(answer, usage=USAGE)


def lookup_tool(job: Job) -> Any:
    def lookup(city: str) -> str:
        """Look a city up (English names)."""
        job.log(event="lookup", city=city)
        if city == "Köln":
            raise ModelRetry("use the English name: Cologne")
        return f"{city}: found"

    return tool(lookup)


def validator(job: Job) -> Any:
    def two_items(out: Settled, context: OutputContext) -> Settled:
        job.log(event="validator", items=out.items)
        if out.items != 2:
            raise ModelRetry("there were two items: count again")
        return out

    return two_items


def build(job: Job, store: RunStore) -> Any:
    ttl = job.spec.get("ttl", 30.0)
    loop = job.spec["loop"]
    if loop == "typed":
        return ReActLoop(
            model(job, "typed", typed_reply),
            [*tools(job), lookup_tool(job)],
            store=store,
            lease_ttl=ttl,
            output_type=Settled,
            output_validator=validator(job),
        )
    if loop == "react":
        return ReActLoop(model(job, "react", react_reply), tools(job), store=store, lease_ttl=ttl)
    if loop == "rewoo":
        return ReWOOPipeline(
            model(job, "rewoo", rewoo_planner), tools(job), store=store, lease_ttl=ttl
        )
    return PlanAndExecute(
        model(job, "planner", pe_planner),
        tools(job),
        executor=model(job, "executor", pe_executor),
        reporter=model(job, "reporter", pe_reporter),
        store=store,
        lease_ttl=ttl,
    )


def summary(loop: str, result: Any) -> dict[str, Any]:
    """What a run produced, as JSON: compared between an interrupted run and a clean one."""
    usage = [result.usage.input_tokens, result.usage.output_tokens]
    common = {
        "answer": result.answer,
        "stop_reason": result.stop_reason,
        "usage": usage,
        "model_calls": result.model_calls,
    }
    if loop in ("react", "typed"):
        output = result.output.model_dump(mode="json") if result.output is not None else None
        return {
            **common,
            "messages": [message_to_dict(m) for m in result.messages],
            "tool_calls": result.tool_calls,
            "pending": [c.id for c in result.pending_approvals],
            "output": output,
        }
    if loop == "rewoo":
        evidence = {k: [o.content, o.is_error] for k, o in result.evidence.items()}
        return {**common, "plan": result.plan.model_dump(mode="json"), "evidence": evidence}
    return {
        **common,
        "plan": result.plan.model_dump(mode="json"),
        "step_results": result.step_results,
        "step_status": result.step_status,
        "pending": [c.id for c in result.pending_approvals],
    }


def drive(loop: Any, spec: dict[str, Any], decisions: dict[str, Any] | None) -> Any:
    """`run` or `resume` the loop, on the sync driver or (`"driver": "async"`) asyncio's."""
    task = spec.get("task") or TASK
    if spec.get("driver") == "async":
        if spec["op"] == "run":
            return asyncio.run(loop.arun(task, run_id=spec["run_id"]))
        return asyncio.run(loop.aresume(spec["run_id"], decisions))
    if spec["op"] == "run":
        return loop.run(task, run_id=spec["run_id"])
    return loop.resume(spec["run_id"], decisions)


def run_job(spec: dict[str, Any], backend: str, target: str) -> dict[str, Any]:
    """Run one job (`op` "run" or "resume") to its end; the outcome as JSON.

    A resume waits (retrying every 100 ms) while the run is leased, for up to `wait` seconds,
    and answers a `CallInDoubt` with "rerun" for every call in doubt when `answer_doubt`.
    """
    job = Job(spec)
    store: RunStore = SQLiteStore(target) if backend == "sqlite" else PostgresStore(target)
    loop = build(job, Counting(store, job))  # type: ignore[arg-type]
    leased, doubts = 0, []
    decisions = spec.get("decisions")
    deadline = time.monotonic() + spec.get("wait", 0)
    if "start_at" in spec:  # start together with another process
        time.sleep(max(0.0, spec["start_at"] - time.time()))
    out: dict[str, Any]
    while True:
        try:
            result = drive(loop, spec, decisions)
            out = {"ok": True, "result": summary(spec["loop"], result)}
            break
        except RunLeased as exc:
            if time.monotonic() < deadline:
                leased += 1
                time.sleep(0.1)
                continue
            out = {"error": "RunLeased", "message": str(exc), "holder": exc.holder}
            break
        except CallInDoubt as exc:
            ids = [c.id for c in exc.calls]
            if spec.get("answer_doubt") and not decisions:
                doubts += ids
                decisions = {i: "rerun" for i in ids}
                continue
            out = {"error": "CallInDoubt", "message": str(exc), "calls": ids}
            break
        except Exception as exc:
            out = {
                "error": type(exc).__name__,
                "message": str(exc),
                "trace": traceback.format_exc(),
            }
            break
    return {**out, "writes": job.writes, "leased": leased, "doubts": doubts}


# -- the zygote -------------------------------------------------------------------------------


def warm_up() -> None:
    """Run every loop once here, on both drivers, so that each child starts warm (modules
    imported, tool schemas and caches built) and a test pays for that once."""
    with tempfile.TemporaryDirectory() as tmp:
        for loop, task, driver in itertools.product(LOOPS, (TASK, PAY_TASK), ("sync", "async")):
            spec = {"loop": loop, "op": "run", "run_id": f"{loop}-{task}-{driver}", "task": task}
            job = Job({**spec, "driver": driver, "ledger": f"{tmp}/ledger", "log": f"{tmp}/log"})
            store = SQLiteStore(f"{tmp}/runs.db")
            drive(build(job, store), job.spec, None)
            store.close()


def main() -> None:
    backend, target = sys.argv[1], sys.argv[2]
    warm_up()
    if backend == "postgres":  # libpq loaded and the tables made, then the connection closed
        with PostgresStore(target) as store:
            store.list_runs(kind="none")
    # The warm-up left idle tool threads behind; a forked child does not count on them
    # (agentloops.engine._threads), so forking here is safe.
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "spawn":
            spec = command["job"]
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    outcome = run_job(spec, backend, target)
                except BaseException:
                    outcome, code = {"error": "crash", "trace": traceback.format_exc()}, 1
                with open(spec["out"], "w") as out:
                    json.dump(outcome, out)
                os._exit(code)
            reply: dict[str, Any] = {"pid": pid}
        else:
            reply = wait(command["pid"], command["timeout"])
        print(json.dumps(reply), flush=True)


def wait(pid: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return {"signal": os.WTERMSIG(status)}
            return {"code": os.WEXITSTATUS(status)}
        if time.monotonic() > deadline:
            return {"timeout": True}
        time.sleep(0.01)


if __name__ == "__main__":
    main()
