"""Runs and ReWOO tool steps on a real Dask cluster: two worker processes on loopback."""

from __future__ import annotations

import functools
import os

import pytest

from agentloops import (
    ConfigurationError,
    ReActResult,
    ReWOOPipeline,
    ReWOOPlan,
    ReWOOPlanStep,
    run_many,
)
from agentloops.testing import ScriptedModel, respond_structured

distributed = pytest.importorskip("distributed")

import _dask_helpers as helpers  # noqa: E402  (workers import it by this name too)

pytestmark = pytest.mark.dask


@pytest.fixture(scope="module")
def executor(tmp_path_factory):
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
            local_directory=str(tmp_path_factory.mktemp("dask")),
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client.get_executor()


def test_twenty_agent_runs_keep_their_order_and_one_failure_loses_nothing(executor):
    tasks = list(range(20))
    items = run_many(helpers.agent_run, tasks, executor=executor)

    assert [it.input for it in items] == tasks
    failed = items[helpers.FAILING_TASK]
    assert failed.output is None
    assert failed.error == "ModelError: the model server is unreachable"
    answered = [it for it in items if it.ok]
    assert len(answered) == 19
    assert all(isinstance(it.output, ReActResult) for it in answered)
    assert [it.output.answer for it in answered] == [
        f"{t} doubled is {2 * t}" for t in tasks if t != helpers.FAILING_TASK
    ]
    pids = {int(it.output.run_id.split("@")[1]) for it in answered}
    assert os.getpid() not in pids  # they ran in the worker processes


def test_lambdas_travel_by_value_to_dask(executor):
    items = run_many(lambda n: n * n, [1, 2, 3], executor=executor)
    assert [it.output for it in items] == [1, 4, 9]


def test_an_unpicklable_tool_is_named_before_anything_is_sent(executor):
    work = functools.partial(helpers.run_with_tools, tools=[helpers.double, helpers.locked_bump])
    with pytest.raises(ConfigurationError) as info:
        run_many(work, [1, 2], executor=executor)
    message = str(info.value)
    assert "cannot be pickled for ClientExecutor" in message
    assert "item 1: tool 'bump'" in message
    assert "lock" in message


def _plan():
    step = ReWOOPlanStep
    return ReWOOPlan(
        steps=[
            step(step_id="#E1", description="who runs me", tool_name="whoami", tool_args={}),
            step(
                step_id="#E2",
                description="describe it",
                tool_name="describe",
                tool_args={"pid": "#E1"},
                depends_on=["#E1"],
            ),
        ]
    )


def test_rewoo_tool_steps_run_in_worker_processes(executor):
    tools = [helpers.whoami, helpers.describe]
    pipeline = ReWOOPipeline(ScriptedModel([]), tools, executor=executor)

    evidence = pipeline.work(_plan())

    assert list(evidence) == ["#E1", "#E2"]
    assert not any(outcome.is_error for outcome in evidence.values())
    worker_pid = int(evidence["#E1"].content)
    assert worker_pid != os.getpid()
    described, asker = evidence["#E2"].content.split(", asked from process ")
    assert described == f"process {worker_pid}"
    assert int(asker) != os.getpid()  # the dependent step ran on a worker too


def test_rewoo_names_a_tool_that_cannot_reach_the_workers(executor):
    plan = ReWOOPlan(
        steps=[ReWOOPlanStep(step_id="#E1", description="count", tool_name="bump", tool_args={})]
    )
    with pytest.raises(ConfigurationError, match="tool 'bump'"):
        ReWOOPipeline(ScriptedModel([]), [helpers.locked_bump], executor=executor).work(plan)


def test_a_tool_from_the_script_being_run_is_refused_before_submission(executor, monkeypatch):
    lookup = helpers.script_made_tool(monkeypatch)
    plan = ReWOOPlan(
        steps=[
            ReWOOPlanStep(
                step_id="#E1", description="find", tool_name="lookup", tool_args={"key": "a"}
            )
        ]
    )
    planner = ScriptedModel([respond_structured(plan.model_dump()), "answered anyway"])
    pipeline = ReWOOPipeline(planner, [lookup], executor=executor)
    with pytest.raises(ConfigurationError) as info:
        pipeline.run("look a up")
    assert "tool 'lookup' is defined in the script being run (module __main__)" in str(info.value)
    work = functools.partial(helpers.run_with_tools, tools=[lookup])
    with pytest.raises(ConfigurationError, match="item 0: tool 'lookup'"):
        run_many(work, [1], executor=executor)


# -- durable items: a worker killed mid-item ------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store(request, tmp_path):
    """A store the worker processes reach: a SQLite file, or PostgreSQL."""
    from agentloops import PostgresStore, SQLiteStore

    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "runs.db") as store:
            yield store
        return
    with PostgresStore(request.getfixturevalue("postgres_conninfo")) as store:
        with store.connect(autocommit=True) as conn:
            conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
        yield store


def test_a_worker_killed_mid_item_leaves_it_to_be_resumed_with_no_tool_call_repeated(
    executor, shared_store, tmp_path
):
    import json

    tasks = [{"n": n, "dir": str(tmp_path), "kill": 2} for n in range(4)]
    items = run_many(
        helpers.durable_item, tasks, executor=executor, store=shared_store, key=_item_id
    )
    assert [it.error for it in items] == [None] * 4, [it.error for it in items]
    assert [it.output.split(" in ")[0] for it in items] == [f"item {n} done" for n in range(4)]
    assert (tmp_path / "killed-2").exists()  # the worker did die mid-item 2
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    keys = [line["key"].split("@")[0] for line in ledger]  # without the runs' nonces
    assert sorted(keys) == sorted(f"item-{n}:c{n}-{s}" for n in range(4) for s in (1, 2))
    journal = shared_store.read("item-2")
    # item 2's first call ran once (in the killed worker), recorded once; its second ran
    # in the attempt that resumed the run from its journal
    assert [r.kind for r in journal].count("tool_finished") == 2
    assert all(shared_store.run_info(f"item-{n}").status == "finished" for n in range(4))

    again = run_many(
        helpers.durable_item, tasks, executor=executor, store=shared_store, key=_item_id
    )
    assert [it.output for it in again] == [it.output for it in items]  # from the journals
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 8  # nothing ran


def _item_id(task):
    return f"item-{task['n']}"


def test_a_memory_store_cannot_be_shared_with_worker_processes(executor):
    from agentloops import MemoryStore

    with pytest.raises(ConfigurationError, match=r"MemoryStore\(\) lives in this process"):
        run_many(helpers.durable_item, [{"n": 1}], executor=executor, store=MemoryStore())
