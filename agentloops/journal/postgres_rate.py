"""A rate limit's window shared by every process through a `PostgresStore`'s database.

One table, `agentloops_rate_events`, keyed by the limiter's name: a row per call started
and a row per finished call's tokens. Admission is one short transaction under an
advisory lock on the name: drop what aged out of the window, count what is left, and
record the start if the limits allow it. Times are the database server's
(`clock_timestamp()`), so workers on machines with different clocks share one window.
It knows nothing of model clients: `RateLimiter(store=...)` calls `admit` and `spend`.

Rule: it knows no model client; only its window's counts, by the database's clock.
"""

from __future__ import annotations

from typing import Any

_TABLE = (
    "CREATE TABLE IF NOT EXISTS agentloops_rate_events ("
    " name text NOT NULL, at timestamptz NOT NULL, started boolean NOT NULL,"
    " tokens bigint NOT NULL)",
    "CREATE INDEX IF NOT EXISTS agentloops_rate_events_name ON agentloops_rate_events (name, at)",
)
_SINCE = "name = %(name)s AND at > clock_timestamp() - %(window)s * interval '1 second'"


class PostgresRateWindow:
    """The shared window of the limiter called `name` (`PostgresStore.rate_window(name)`)."""

    def __init__(self, store: Any, name: str):
        # `store` is the PostgresStore that made this window (not imported: no circle)
        self.store = store
        self.name = name
        with store._using(name, "create the rate limit table", transaction=True) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentloops_rate_events'))")
            for statement in _TABLE:
                conn.execute(statement)

    def admit(self, requests: int | None, tokens: int | None, window: float) -> float:
        """Record a call's start and return 0.0 if the window allows it, else the seconds
        until it may (nothing is recorded then)."""
        params = {"name": self.name, "window": window}
        with self.store._using(self.name, "admit a rate-limited call", transaction=True) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%(name)s))", params)
            conn.execute(
                "DELETE FROM agentloops_rate_events WHERE name = %(name)s"
                " AND at <= clock_timestamp() - %(window)s * interval '1 second'",
                params,
            )
            rows = conn.execute(
                "SELECT extract(epoch FROM clock_timestamp() - at), started, tokens"
                f" FROM agentloops_rate_events WHERE {_SINCE} ORDER BY at",
                params,
            ).fetchall()
            ages = [(float(age), started, int(spent)) for age, started, spent in rows]
            starts = [age for age, started, _ in ages if started]
            waits = [0.0]
            if requests is not None and len(starts) >= requests:
                waits.append(window - starts[len(starts) - requests])  # the oldest that counts
            spent = [(age, n) for age, started, n in ages if not started]
            total = sum(n for _, n in spent)
            if tokens is not None and total >= tokens:
                for age, n in spent:  # oldest first: when enough has aged out
                    total -= n
                    if total < tokens:
                        waits.append(window - age)
                        break
            wait = max(waits)
            if wait > 0:
                return wait
            conn.execute(
                "INSERT INTO agentloops_rate_events VALUES (%(name)s, clock_timestamp(), true, 0)",
                params,
            )
            return 0.0

    def spend(self, tokens: int) -> None:
        """Count a finished call's tokens in the window."""
        with self.store._using(self.name, "record a call's tokens") as conn:
            conn.execute(
                "INSERT INTO agentloops_rate_events VALUES (%s, clock_timestamp(), false, %s)",
                (self.name, tokens),
            )
