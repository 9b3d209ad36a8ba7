"""What every loop class offers for its journaled runs, written once: `fork`, `afork` and
`status` (each loop's `resume` differs: ReAct's also resumes from a result).

A loop class inherits `JournaledRuns[ItsResult]` and provides the four parts the methods
need: its `Runner`, its `on_event` sink, `_host()` (where its tool calls run),
`_rebuilt(meta, run_id, observed)` (the machine a journal is replayed into) and
`_fingerprint()`.

Rule: it knows the runner, never a loop's decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic

from agentloops.engine.effects import R

if TYPE_CHECKING:
    from typing import Any

    from agentloops.engine._fingerprint import Parts
    from agentloops.engine.effects import Machine
    from agentloops.engine.fork import Replacement
    from agentloops.engine.host import ToolHost
    from agentloops.engine.runner import Runner
    from agentloops.events import EventSink

__all__ = ["JournaledRuns"]


class JournaledRuns(Generic[R]):
    """`fork`, `afork` and `status` over a loop's runner (see the module doc)."""

    if TYPE_CHECKING:
        _runner: Runner[R]
        on_event: EventSink | None

        def _host(self) -> ToolHost: ...
        def _rebuilt(self, meta: dict[str, Any], run_id: str, observed: bool) -> Machine[R]: ...
        def _fingerprint(self) -> Parts: ...

    def fork(
        self,
        run_id: str,
        *,
        at: int,
        new_run_id: str | None = None,
        replace: Replacement | None = None,
    ) -> R:
        """Start a new run from a journaled one's record `at` (needs a `store`): its
        journal up to `at` is copied (record `at` replaced by `replace`, when given: a
        model answer, a tool's result or a decision), replayed, then the fork goes on live.
        The source run is untouched; the fork's meta names it (`forked_from`). See
        docs/operations.md.

        Raises:
            RunNotFound: no run `run_id`; RunExists: `new_run_id` is taken.
            ConfigurationError: no store; `at` is no record of the run; `replace` does
                not fit record `at`.
        """
        opening = self._runner.forked(
            run_id, at, new_run_id, replace, self._rebuilt, self._fingerprint
        )
        return self._runner.run(opening, self._host(), self.on_event)

    async def afork(
        self,
        run_id: str,
        *,
        at: int,
        new_run_id: str | None = None,
        replace: Replacement | None = None,
    ) -> R:
        """`fork` on the event loop."""
        opening = self._runner.forked(
            run_id, at, new_run_id, replace, self._rebuilt, self._fingerprint
        )
        return await self._runner.arun(opening, self._host(), self.on_event)

    def status(self, run_id: str) -> R:
        """A journaled run's result as far as its journal goes (needs a `store`), calling
        nothing and taking no lease: a paused run lists its pending calls; a run that
        stopped part-way has stop reason "running"."""
        return self._runner.status(run_id, self._rebuilt, self._host(), self._fingerprint)
