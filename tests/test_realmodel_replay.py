"""The sessions `make realmodel` recorded against a real llama-cpp-python server, replayed.

Each test drives the same loop, the same way, through `OpenAICompatModel` on a replaying
HTTP client: the library must send exactly the recorded requests (a change shows as a
diff) and handle the real server's replies (its call ids, its 500s, a 135M model's weak
output) as it did live. Re-record with `make realmodel` after a deliberate change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realmodel import ANALYST_ARGV, CASSETTES, SESSIONS, run_session

from agentloops import Cassette, OpenAICompatModel


def replaying(name: str) -> tuple[Cassette, OpenAICompatModel]:
    cassette = Cassette.load(CASSETTES / f"{name}.json")
    meta = cassette.meta
    client = cassette.client()
    # No waiting: a recorded timeout is retried at once.
    model = OpenAICompatModel(meta["base_url"], meta["model"], http_client=client, sleep=_no_wait)
    return cassette, model


def _no_wait(seconds: float) -> None:
    pass


def test_every_session_has_a_cassette():
    recorded = sorted(p.stem for p in CASSETTES.glob("*.json"))
    assert recorded == sorted([*SESSIONS, "market_analyst"])


@pytest.mark.parametrize("name", list(SESSIONS))
def test_a_loop_session_replays_request_for_request(name):
    cassette, model = replaying(name)
    outcome = run_session(name, model)
    cassette.assert_complete()
    assert (outcome.stop_reason, outcome.model_calls) == (
        cassette.meta["stop_reason"],
        cassette.meta["model_calls"],
    )


def test_the_market_analyst_session_replays(tmp_path: Path, instant_analyst_tools):
    from market_analyst.cli import main

    cassette, model = replaying("market_analyst")
    argv = ["--base-url", cassette.meta["base_url"], "--model", cassette.meta["model"]]
    argv += ["--state-dir", str(tmp_path), "--reports-dir", str(tmp_path), *ANALYST_ARGV]
    assert main(argv, model=model) == cassette.meta["exit_code"]
    cassette.assert_complete()
