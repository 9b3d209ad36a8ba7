"""Evaluator: a fresh-context judge of a draft, before it goes out.

It sees only the task, the draft and the evidence, in one user message: never the
transcript that produced the draft, so it cannot be talked into agreeing with it.
It has no tools.

Rule: a kit over structured output and the engine's drivers; it knows no loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import pydantic

from agentloops.engine import sync
from agentloops.engine.effects import Machine
from agentloops.engine.host import NO_TOOLS as _NO_TOOLS
from agentloops.engine.runs import Totals
from agentloops.errors import check_limits
from agentloops.events import EventSink
from agentloops.middleware import Chain, Middleware, chained
from agentloops.model import ModelClient
from agentloops.structured import structured_machine
from agentloops.usage import Usage

EVALUATOR_SYSTEM = """You are the evaluator of an agent's draft answer.
You see the task, the draft and the evidence the draft may rely on, and nothing else. \
Judge the draft against the criteria you are given. Answer with a verdict and the \
reasons for it, one short sentence each; quote the claim a reason is about."""

DEFAULT_CRITERIA = """\
- pass: the draft answers the task, and every factual claim in it (figures, names, \
dates, quotations, sources) is supported by the evidence.
- fail: the draft does not answer the task, contradicts the evidence, or makes a \
claim the evidence does not support. An unsupported claim is a failure even if it \
might be true; with no evidence, any factual claim is unsupported.
- needs_human: the evidence itself is contradictory, or deciding needs judgment or \
authority you do not have (legal, medical, financial advice, publishing decisions)."""

VerdictLabel = Literal["pass", "fail", "needs_human"]


class Verdict(pydantic.BaseModel):
    """The evaluator's vote and its reasons.

    `usage` and `model_calls` record what the vote cost; they are left out of dumps,
    reprs and equality, so `Verdict("pass", ["ok"])` equals a returned verdict.
    """

    model_config = pydantic.ConfigDict(defer_build=True)  # built on first use: fast import

    verdict: VerdictLabel
    reasons: list[str] = pydantic.Field(default_factory=list)
    usage: Usage = pydantic.Field(default_factory=Usage, exclude=True, repr=False)
    model_calls: int = pydantic.Field(default=0, exclude=True, repr=False)

    def __init__(self, verdict: Any = None, reasons: Any = None, /, **data: Any):
        # Also positional: Verdict("pass", ["..."]), as the class docstring writes it.
        if verdict is not None:
            data["verdict"] = verdict
        if reasons is not None:
            data["reasons"] = reasons
        super().__init__(**data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Verdict):
            return NotImplemented
        return (self.verdict, self.reasons) == (other.verdict, other.reasons)

    __hash__ = None  # type: ignore[assignment]

    @property
    def passed(self) -> bool:
        """True for a "pass" verdict."""
        return self.verdict == "pass"


class _Reply(pydantic.BaseModel):
    """What the model fills (the cost fields of `Verdict` are not the model's to write)."""

    model_config = pydantic.ConfigDict(defer_build=True)

    verdict: VerdictLabel
    reasons: list[str] = pydantic.Field(description="one short sentence per reason")


Evidence = str | Sequence[str] | Mapping[str, Any] | None


class Evaluator:
    """Vote pass, fail or needs_human on a draft, from a fresh context.

    Args:
        model: any `ModelClient`; ideally not the one that wrote the draft.
        criteria: what pass, fail and needs_human mean. The default fails any claim the
            evidence does not support.
        system: the system prompt (`None`: `EVALUATOR_SYSTEM`).
        max_retries: re-asks when the output does not validate.
        on_event: receives the model call events (`loop="evaluator"`).
        middleware: `Middleware` around its model call (docs/middleware.md); a guard that
            trips raises `GuardrailTripped`.

    Raises (from `evaluate`):
        ModelOutputError: the verdict still did not validate after the retries (treat it
            as "not passed": a gate must not fail open).
    """

    def __init__(
        self,
        model: ModelClient,
        *,
        criteria: str | None = None,
        system: str | None = None,
        max_retries: int = 2,
        on_event: EventSink | None = None,
        middleware: Iterable[Middleware] = (),
    ):
        check_limits(max_retries=(max_retries, 0))
        self.model = model
        self.criteria = DEFAULT_CRITERIA if criteria is None else criteria
        self.system = EVALUATOR_SYSTEM if system is None else system
        self.max_retries = max_retries
        self.on_event = on_event
        self.chain = Chain(middleware)

    def evaluate(self, task: str, draft: str, evidence: Evidence = None) -> Verdict:
        """Judge `draft` as an answer to `task`, given only `evidence`."""
        return sync.run(self.machine(task, draft, evidence), _NO_TOOLS, self.on_event)

    async def aevaluate(self, task: str, draft: str, evidence: Evidence = None) -> Verdict:
        """`evaluate` on the event loop."""
        from agentloops.engine import aio  # asyncio loads with the first async run

        return await aio.run(self.machine(task, draft, evidence), _NO_TOOLS, self.on_event)

    def machine(self, task: str, draft: str, evidence: Evidence = None) -> Machine[Verdict]:
        """`evaluate` as a step machine (see `agentloops.engine`), inside its middleware."""
        totals = Totals()
        machine = self._machine(task, draft, evidence, totals)
        return chained(
            machine,
            self.chain,
            loop="evaluator",
            run_id="",
            task=task,
            totals=totals,
            parent_run_id=None,
            observed=self.on_event is not None,
        )

    def _machine(
        self, task: str, draft: str, evidence: Evidence, totals: Totals
    ) -> Machine[Verdict]:
        reply = yield from structured_machine(
            self.model,
            _Reply,
            self.prompt(task, draft, evidence),
            system=self.system,
            max_retries=self.max_retries,
            loop="evaluator",
            role="evaluator",
            totals=totals,
        )
        return Verdict(
            verdict=reply.value.verdict,
            reasons=reply.value.reasons,
            usage=reply.usage,
            model_calls=reply.model_calls,
        )

    def prompt(self, task: str, draft: str, evidence: Evidence = None) -> str:
        """The one user message the evaluator sees."""
        return (
            f"Criteria:\n{self.criteria}\n\n"
            f"<task>\n{task}\n</task>\n\n"
            f"<draft>\n{draft}\n</draft>\n\n"
            f"<evidence>\n{_render(evidence)}\n</evidence>"
        )


def _render(evidence: Evidence) -> str:
    if evidence is None:
        return "(no evidence was given)"
    if isinstance(evidence, str):
        return evidence.strip() or "(no evidence was given)"
    if isinstance(evidence, Mapping):
        items = [f"[{k}] {v}" for k, v in evidence.items()]
    else:
        items = [f"[{i}] {v}" for i, v in enumerate(evidence, 1)]
    return "\n".join(items) or "(no evidence was given)"
