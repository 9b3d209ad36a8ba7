"""Shared fixtures: respx for the anthropic SDK, and an environment free of Anthropic settings.

The anthropic SDK (>= 1.0) sends through `httpx2`/`httpcore2`, which respx does not
patch by default, so a plain `respx.mock` would let its requests reach the network.
We register a respx mocker for the httpcore2 connection classes (the package
`pytest-httpx2` ships the same one; if it is installed its registration is kept).
Routes still receive and return `httpx.Request`/`httpx.Response` objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import respx
from respx.mocks import HTTPCoreMocker, Mocker

import agentloops as _loops

ANTHROPIC_API = "https://api.anthropic.com"

if "httpcore2" not in Mocker.registry:

    class _HTTPCore2Mocker(HTTPCoreMocker):
        name = "httpcore2"
        targets: ClassVar[list[str]] = [
            "httpcore2._sync.connection.HTTPConnection",
            "httpcore2._sync.connection_pool.ConnectionPool",
            "httpcore2._sync.http_proxy.HTTPProxy",
            "httpcore2._async.connection.AsyncHTTPConnection",
            "httpcore2._async.connection_pool.AsyncConnectionPool",
            "httpcore2._async.http_proxy.AsyncHTTPProxy",
        ]


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (`@pytest.mark.anyio`) run on asyncio, anyio's pytest plugin drives them."""
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_anthropic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK reads ANTHROPIC_BASE_URL, ANTHROPIC_CUSTOM_HEADERS, profiles... from the env:
    a developer's shell must not change what a test sends, or where."""
    import os

    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)


@pytest.fixture
def anthropic_api() -> Iterator[respx.MockRouter]:
    """A respx router for api.anthropic.com that intercepts the SDK's httpcore2 traffic.

    Every route must be called; an unmatched request fails the test.
    """
    with respx.mock(using="httpcore2", base_url=ANTHROPIC_API, assert_all_called=True) as router:
        yield router


@pytest.fixture
def messages_route(anthropic_api: respx.MockRouter) -> respx.Route:
    """The Messages endpoint on `anthropic_api`; give it `side_effect` or `mock(...)`."""
    return anthropic_api.post("/v1/messages")


@pytest.fixture
def instant_analyst_tools(tmp_path: Path) -> Iterator[object]:
    """The Market Analyst example's tools with no simulated latency, a ledger under
    `tmp_path` and the fixture data; the example's defaults come back afterwards (also
    after a test that chose another data source, such as `--live` on a fake)."""
    from market_analyst import tools  # examples/ is on pytest's pythonpath
    from market_analyst.sources import FixtureSource

    tools.configure(latency_scale=0, ledger_path=tmp_path / "ledger.jsonl")
    yield tools
    tools.configure(latency_scale=1.0, ledger_path=Path("ledger.jsonl"), source=FixtureSource())


# -- every loop under both drivers ---------------------------------------------------------
#
# A test that takes `ReActLoop` (or `ReWOOPipeline`, `PlanAndExecute`, `Router`,
# `Evaluator`) as a parameter runs twice: once with the class itself, once with a subclass
# whose `run`, `resume`, `fork`, `route` and `evaluate` drive `arun`, `aresume`, `afork`,
# `aroute` and `aevaluate` on a fresh event loop. The parameter shadows the imported name,
# so the test body reads the same under both drivers.

_ASYNC_TWINS = {
    "run": "arun",
    "resume": "aresume",
    "fork": "afork",
    "route": "aroute",
    "evaluate": "aevaluate",
}


def _driven_by_asyncio(cls: type) -> type:
    def twin(name: str, async_name: str) -> object:
        def method(self: object, *args: object, **kwargs: object) -> object:
            return asyncio.run(getattr(self, async_name)(*args, **kwargs))

        method.__name__ = name
        return method

    methods = {n: twin(n, a) for n, a in _ASYNC_TWINS.items() if hasattr(cls, a)}
    return type(cls.__name__, (cls,), methods)


def _both_drivers(cls: type) -> object:
    @pytest.fixture(params=["sync", "async"], name=cls.__name__)
    def fixture(request: pytest.FixtureRequest) -> type:
        return cls if request.param == "sync" else _driven_by_asyncio(cls)

    return fixture


ReActLoop = _both_drivers(_loops.ReActLoop)
ReWOOPipeline = _both_drivers(_loops.ReWOOPipeline)
PlanAndExecute = _both_drivers(_loops.PlanAndExecute)
Router = _both_drivers(_loops.Router)
Evaluator = _both_drivers(_loops.Evaluator)


POSTGRES_ENV = "AGENTLOOPS_TEST_POSTGRES"


@pytest.fixture(scope="session")
def postgres_conninfo() -> Iterator[str]:
    """A throwaway database on the server `AGENTLOOPS_TEST_POSTGRES` names (a libpq connection
    string; `.ci/run` starts a server and sets it), dropped after the session. Tests that
    need it are skipped when the variable is unset."""
    import os
    import secrets

    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(
            f"{POSTGRES_ENV} is unset: run under .ci/with-postgres for the PostgreSQL tests"
        )
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"agentloops_test_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(server, dbname=name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A run store of each backend for the durable loops' tests (PostgreSQL only when
    `AGENTLOOPS_TEST_POSTGRES` names a server; skipped otherwise)."""
    from agentloops.journal import MemoryStore, PostgresStore, SQLiteStore

    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        with SQLiteStore(tmp_path / "runs.db") as sqlite_store:
            yield sqlite_store
    else:
        with PostgresStore(request.getfixturevalue("postgres_conninfo")) as pg_store:
            with pg_store.connect(autocommit=True) as conn:
                conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
            yield pg_store
