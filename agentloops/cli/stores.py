"""Store URLs: `sqlite:///PATH` and `postgresql://...` as run stores.

Rule: it knows the URL schemes and the store classes' constructors, nothing of commands.
"""

from __future__ import annotations

from agentloops.errors import ConfigurationError
from agentloops.journal.records import RunStore

SCHEMES = ("sqlite:///", "postgresql://", "postgres://")


def open_store(url: str) -> RunStore:
    """The run store `url` names.

    `sqlite:///runs.db` is `runs.db` here, `sqlite:////var/lib/runs.db` an absolute
    path; a SQLite file that does not exist is refused (a typo would otherwise start an
    empty store). `postgresql://` and `postgres://` URLs go to `PostgresStore` as they are.

    Raises:
        ConfigurationError: a URL of another scheme, or a SQLite file that is not there.
        ImportError: a PostgreSQL URL without psycopg installed.
    """
    if url.startswith("sqlite:///"):
        import os

        from agentloops.journal.sqlite import SQLiteStore

        path = url[len("sqlite:///") :]
        if not path or not os.path.isfile(path):
            raise ConfigurationError(f"no SQLite store at {path!r} (from {url!r})")
        return SQLiteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        from agentloops.journal.postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigurationError(
        f"a store URL starts with {', '.join(SCHEMES)}; got {url!r} "
        "(e.g. sqlite:///runs.db or postgresql://user@host/db)"
    )
