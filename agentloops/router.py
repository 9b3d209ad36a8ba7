"""Router: one structured model call picks which route (loop, agent, prompt) handles a task.

A router must always answer: output that does not validate, or a route that does not
exist, falls back to the default route, and the decision says it did.

Rule: a kit over structured output and the engine's drivers; it knows no loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pydantic

from agentloops.engine import sync
from agentloops.engine.effects import Machine
from agentloops.engine.host import NO_TOOLS as _NO_TOOLS
from agentloops.engine.runs import Totals
from agentloops.errors import ConfigurationError, ModelOutputError, check_limits
from agentloops.events import EventSink, Record
from agentloops.middleware import Chain, Middleware, chained
from agentloops.model import ModelClient
from agentloops.structured import structured_machine
from agentloops.usage import Usage

ROUTER_SYSTEM = """You are the router of an agent system.
Read the task and pick the one route, from the list you are given, that should handle \
it. Answer with the route's name exactly as listed, and one sentence of reasoning."""


class RouteChoice(pydantic.BaseModel):
    """What the model fills: a route name and why."""

    model_config = pydantic.ConfigDict(defer_build=True)  # built on first use: fast import

    route: str = pydantic.Field(description="one route name, exactly as listed")
    reasoning: str = pydantic.Field(default="", description="why, in one sentence")


@dataclass(frozen=True)
class RouteDecision(Record):
    """Where a task goes, and whether the router had to fall back to get there."""

    route: str
    reasoning: str
    fallback: bool = False
    """True when the model's answer was unusable and `route` is the default."""
    detail: str = ""
    """Why the router fell back ("" when it did not)."""
    usage: Usage = field(default_factory=Usage)
    model_calls: int = 0


class Router:
    """Pick a route for a task with one structured model call.

    Args:
        model: any `ModelClient`; a small, fast one is usually enough.
        routes: route name to a description the model reads to choose.
        default: the route taken when the model's answer is unusable.
        system: the system prompt (`None`: `ROUTER_SYSTEM`).
        max_retries: re-asks when the output does not validate, before falling back.
        on_event: receives the model call events (`loop="router"`).
        middleware: `Middleware` around its model call (docs/middleware.md); a guard that
            trips raises `GuardrailTripped`.

    Examples:
        >>> from agentloops.testing import ScriptedModel, respond_structured
        >>> model = ScriptedModel([respond_structured({"route": "math", "reasoning": "sums"})])
        >>> router = Router(model, {"math": "arithmetic", "chat": "anything else"}, default="chat")
        >>> router.route("2 + 2?").route
        'math'
    """

    def __init__(
        self,
        model: ModelClient,
        routes: dict[str, str],
        *,
        default: str,
        system: str | None = None,
        max_retries: int = 1,
        on_event: EventSink | None = None,
        middleware: Iterable[Middleware] = (),
    ):
        check_limits(max_retries=(max_retries, 0))
        if not routes:
            raise ConfigurationError("routes must name at least one route")
        if default not in routes:
            raise ConfigurationError(f"default {default!r} is not a route; routes: {list(routes)}")
        self.model = model
        self.routes = dict(routes)
        self.default = default
        self.system = ROUTER_SYSTEM if system is None else system
        self.max_retries = max_retries
        self.on_event = on_event
        self.chain = Chain(middleware)
        # Lenient lookup: "Billing " still means "billing"; exact names win.
        self._folded = {name.strip().casefold(): name for name in reversed(list(routes))}

    def route(self, task: str) -> RouteDecision:
        """Pick a route for `task`. Never raises for bad model output (falls back instead).

        Raises:
            ModelError: the provider itself failed.
        """
        return sync.run(self.machine(task), _NO_TOOLS, self.on_event)

    async def aroute(self, task: str) -> RouteDecision:
        """`route` on the event loop."""
        from agentloops.engine import aio  # asyncio loads with the first async run

        return await aio.run(self.machine(task), _NO_TOOLS, self.on_event)

    def machine(self, task: str) -> Machine[RouteDecision]:
        """`route` as a step machine (see `agentloops.engine`), inside its middleware."""
        totals = Totals()
        observed = self.on_event is not None
        machine = self._machine(task, totals)
        return chained(
            machine,
            self.chain,
            loop="router",
            run_id="",
            task=task,
            totals=totals,
            parent_run_id=None,
            observed=observed,
        )

    def _machine(self, task: str, totals: Totals) -> Machine[RouteDecision]:
        try:
            reply = yield from structured_machine(
                self.model,
                RouteChoice,
                self._prompt(task),
                system=self.system,
                max_retries=self.max_retries,
                loop="router",
                role="router",
                totals=totals,
            )
        except ModelOutputError as exc:
            return self._fallback(
                f"unusable output: {exc.errors or exc}",
                exc.usage,
                exc.model_calls,
            )
        choice = reply.value
        name = choice.route if choice.route in self.routes else None
        name = name or self._folded.get(choice.route.strip().casefold())
        if name is None:
            known = ", ".join(self.routes)
            return self._fallback(
                f"unknown route {choice.route!r} (routes: {known})", reply.usage, reply.model_calls
            )
        return RouteDecision(
            route=name, reasoning=choice.reasoning, usage=reply.usage, model_calls=reply.model_calls
        )

    def _prompt(self, task: str) -> str:
        listed = "\n".join(f"- {name}: {text}" for name, text in self.routes.items())
        return f"Routes:\n{listed}\n\nTask: {task}"

    def _fallback(self, why: str, usage: Usage, model_calls: int) -> RouteDecision:
        return RouteDecision(
            route=self.default,
            reasoning=f"fell back to the default route {self.default!r}: {why}",
            fallback=True,
            detail=why,
            usage=usage,
            model_calls=model_calls,
        )
