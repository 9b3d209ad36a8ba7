"""PostgresStore beyond the shared contract: the server's clock, a dropped connection, a newer
schema, an unreachable server, the missing extra, and an application's own tables."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from agentloops import PostgresStore, RunLeased, StoreError


@pytest.fixture
def store(postgres_conninfo: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_conninfo) as pg_store:
        with pg_store.connect(autocommit=True) as conn:
            conn.execute("TRUNCATE agentloops_runs, agentloops_journal")
        yield pg_store


def test_lease_times_are_the_servers_not_the_clients(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)  # this client's clock is in 2096
    lease = store.start("r1", kind="react", ttl=30)
    with store.connect() as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    server_now = row[0]
    assert (
        server_now + timedelta(seconds=25) < lease.expires_at < server_now + timedelta(seconds=31)
    )
    with pytest.raises(RunLeased):  # by the client's clock it expired decades ago
        store.acquire("r1", ttl=30)
    assert store.run_info("r1").leased


def test_a_dropped_connection_fails_one_call_then_is_replaced(store: PostgresStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    with store.connect(autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with pytest.raises(StoreError, match="PostgreSQL: could not append to run 'r1'") as caught:
        store.append(lease, "model")
    assert caught.value.run_id == "r1" and caught.value.__cause__ is not None
    assert store.append(lease, "model").seq == 1  # the next call reconnects; the lease holds


def test_schema_from_a_newer_agentloops_is_refused(postgres_conninfo: str) -> None:
    with PostgresStore(postgres_conninfo) as store, store.connect() as conn:
        conn.execute("UPDATE agentloops_schema SET version = 99 WHERE component = 'journal'")
        conn.commit()
        try:
            with pytest.raises(StoreError, match=r"schema version 99 is newer .* \(1\)"):
                PostgresStore(postgres_conninfo)
        finally:
            conn.execute("UPDATE agentloops_schema SET version = 1 WHERE component = 'journal'")
            conn.commit()


def test_a_record_that_is_not_an_object_is_a_store_error(store: PostgresStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    store.append(lease, "model")
    with store.connect(autocommit=True) as conn:
        conn.execute("UPDATE agentloops_journal SET data = '[1, 2]'")
    with pytest.raises(StoreError, match="run 'r1': a stored record is not a JSON object"):
        store.read("r1")


def test_an_application_keeps_its_own_tables_in_the_same_database(store: PostgresStore) -> None:
    lease = store.start("r1", kind="react", ttl=30)
    with store.connect() as conn:
        conn.execute("CREATE TEMP TABLE reports (run_id text, body text, doc tsvector)")
        conn.execute(
            "INSERT INTO reports VALUES ('r1', %(body)s, to_tsvector('english', %(body)s))",
            {"body": "NVDA margins widened on data centre demand"},
        )
        hits = conn.execute(
            "SELECT r.run_id, s.status FROM reports r JOIN agentloops_runs s USING (run_id)"
            " WHERE doc @@ plainto_tsquery('english', 'margin')"
        ).fetchall()
    assert hits == [("r1", "running")]
    store.append(lease, "finished", status="finished")


def test_pickles_as_its_settings(store: PostgresStore) -> None:
    copy = pickle.loads(pickle.dumps(store))
    assert (copy.conninfo, copy.connect_timeout) == (store.conninfo, store.connect_timeout)
    copy.start("r1", kind="react", ttl=30)
    assert store.run_info("r1").epoch == 1
    copy.close()


def test_an_unreachable_server_is_a_store_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StoreError, match="PostgreSQL: cannot open the run store"):
        PostgresStore(f"host=127.0.0.1 port={port} user=nobody", connect_timeout=2)


def test_without_psycopg_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from agentloops import PostgresStore\n"
        "try:\n    PostgresStore('')\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert (
        out.stdout.strip() == "PostgresStore needs psycopg: pip install 'agentloops-kit[postgres]'"
    )
