"""`configure_threads`: the size of agentloops' own pool, and how long a sync-only model
client may take under `arun`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from agentloops import ThreadSettings, configure_threads


@pytest.fixture(autouse=True)
def settings_kept() -> Iterator[None]:
    before = configure_threads()
    yield
    configure_threads(max_threads=before.max_threads, model_timeout=before.model_timeout)


def test_it_reports_and_changes_the_settings() -> None:
    assert isinstance(configure_threads(), ThreadSettings)
    changed = configure_threads(max_threads=5)
    assert changed.max_threads == 5 and configure_threads().max_threads == 5
    assert configure_threads(model_timeout=2.5) == ThreadSettings(max_threads=5, model_timeout=2.5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_threads": 0}, "max_threads must be >= 1"),
        ({"max_threads": True}, "max_threads must be >= 1"),
        ({"model_timeout": 0}, "model_timeout must be > 0"),
        ({"model_timeout": -1.0}, "model_timeout must be > 0"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        configure_threads(**options)  # type: ignore[arg-type]


def fresh(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def test_the_environment_sets_the_default_when_first_used() -> None:
    done = fresh(
        "import agentloops; print(agentloops.configure_threads().max_threads)",
        AGENTLOOPS_MAX_THREADS="3",
    )
    assert done.stdout.strip() == "3", done.stderr


def test_a_bad_environment_value_is_named() -> None:
    done = fresh("import agentloops; agentloops.configure_threads()", AGENTLOOPS_MAX_THREADS="lots")
    assert "AGENTLOOPS_MAX_THREADS must be a whole number >= 1, got 'lots'" in done.stderr
