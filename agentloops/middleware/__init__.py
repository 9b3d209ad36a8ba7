"""Middleware: one seam over a run's model and tool calls (`middleware=[...]` on the loops,
the router and the evaluator).

`Middleware` is what a user subclasses (every hook optional); `MiddlewareContext` is what
each hook is told. A loop applies its chain where it builds a run's machine
(`_chain.chained`), so the hooks run inside the machine: a replayed run recomputes them,
and what they learn from outside (their own model calls) is journaled like the run's own.

Rule: it knows the engine and the vocabulary, and no loop.
"""

from __future__ import annotations

from agentloops.middleware._chain import NO_MIDDLEWARE, Chain, chained
from agentloops.middleware.hooks import Middleware, MiddlewareContext

__all__ = ["NO_MIDDLEWARE", "Chain", "Middleware", "MiddlewareContext", "chained"]
