"""Agent tools: a loop behind a tool (`loop.as_tool(name, description)`), whose calls are
sub-runs that the calling run's driver drives as nested machines, and what a sub-run that
finished (or paused) tells the run that called it.

A call of an `AgentTool` is never a plain function call under a driver: the driver opens
a sub-run (`engine._hosting`), drives its machine next to the caller's other calls, and
hands the caller a `ToolOutcome` whose `run` is the `SubRun` (its usage, model and tool
calls, cost, and a pause's pending calls). Called as a plain function (a `ToolRegistry`
used without a loop), the tool runs `loop.run(task)` and returns the answer: nothing rolls
up then.

Rule: it knows the engine's records and the tree, and no loop: a loop gives its agent
tools what `SubLoop` names.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pydantic

from agentloops.engine.effects import Machine, StartTool
from agentloops.engine.host import ToolHost
from agentloops.engine.tree import Limits, Node
from agentloops.errors import ConfigurationError
from agentloops.messages import Message, SubRun, ToolCall, ToolOutcome
from agentloops.tools import _NAME, Tool
from agentloops.tools._text import capped

__all__ = ["AgentTool", "SubLoop", "agent_tool", "outcome", "paused"]


class SubLoop(Protocol):
    """What a loop gives its agent tools (each of the three loops has these)."""

    @property
    def _runner(self) -> Any:
        """Its `Runner`: the runs' kind, and the meter each run gets."""

    def _host(self) -> ToolHost:
        """Where its runs' tool calls run."""

    def _limits(self) -> Limits:
        """What it bounds the runs below it by."""

    def _sub_machine(
        self, task: Any, *, run_id: str, parent_run_id: str, observed: bool
    ) -> Machine[Any]:
        """A new run's machine, for a sub-run."""

    def _fingerprint(self) -> dict[str, object]:
        """What its runs' decisions depend on (checked when a journaled sub-run reopens)."""

    def _rebuilt(self, meta: dict[str, Any], run_id: str, observed: bool) -> Machine[Any]:
        """A journaled run's machine, from its stored meta."""

    def _sub_resume(
        self, state: dict[str, Any], decisions: dict[str, bool], *, observed: bool
    ) -> Machine[Any]:
        """A paused run, resumed from the state `_paused_state` gave (no store)."""

    def _paused_state(self, result: Any) -> dict[str, Any] | None:
        """What resuming a paused result of its needs, without a store."""

    def _may_pause(self, seen: set[int]) -> bool:
        """Whether its runs may pause for a person (`seen`: loops already asked)."""

    def run(self, task: Any) -> Any: ...


@functools.cache
def _arguments(handoff: bool) -> type[pydantic.BaseModel]:
    """An agent tool's arguments by default (the task), or a handoff's (none: the
    conversation is its task); made at the first agent tool, so `import agentloops` builds
    no pydantic model."""
    if handoff:

        class _NoArguments(pydantic.BaseModel):
            """A handoff takes no arguments: the conversation is its task."""

        return _NoArguments

    class _Task(pydantic.BaseModel):
        """An agent tool's arguments, by default: the task."""

        task: str = pydantic.Field(
            description="The task, in plain words, with everything needed to do it: the "
            "agent sees nothing else of this conversation."
        )

    return _Task


class AgentTool(Tool):
    """A loop as a tool: each call is a sub-run of `loop`, made by the calling run's driver
    (`loop.as_tool(...)` builds one). A handoff is one too (`handoff=True`): its task is the
    conversation, and its answer ends the calling run."""

    hosted = True

    def __init__(
        self,
        loop: SubLoop,
        *,
        name: str,
        description: str,
        input_type: type[pydantic.BaseModel] | None = None,
        handoff: bool = False,
        target_name: str = "",
        input_filter: Callable[[list[Message]], Sequence[Message]] | None = None,
    ):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigurationError(f"agent tool name {name!r} must match {_NAME.pattern}")
        if not isinstance(description, str) or not description.strip():
            raise ConfigurationError(f"agent tool {name!r} needs a description (what it does)")
        if input_type is not None and not (
            isinstance(input_type, type) and issubclass(input_type, pydantic.BaseModel)
        ):
            raise ConfigurationError(
                f"agent tool {name!r}: input_type must be a pydantic model class, got "
                f"{input_type!r:.60}"
            )
        self.loop = loop
        self.input_type = input_type
        self.handoff = handoff
        self.target_name = target_name or name
        """For a handoff: the target's name (the tool is `transfer_to_<name>`)."""
        self.input_filter = input_filter
        """For a handoff: what of the conversation the target gets (`None`: all of it)."""
        tools = loop._host().registry
        super().__init__(
            self._plainly,
            name=name,
            description=description,
            args_model=input_type or _arguments(handoff),
            read_only=all(t.read_only for t in tools),
            on_doubt="rerun",  # safe: the sub-run journals itself, so a re-run resumes it
        )

    @property
    def kind(self) -> str:
        """The sub-runs' kind ("react", "rewoo", "plan_execute")."""
        return str(self.loop._runner.kind)

    def task(self, args: dict[str, Any]) -> str:
        """The sub-run's task for a call's (validated) arguments: the task text, or the
        `input_type` value as JSON."""
        if self.input_type is None:
            return str(args["task"])
        value = self.input_type.model_validate(args)
        return value.model_dump_json(indent=2)

    def may_pause(self, seen: set[int] | None = None) -> bool:
        """Whether a sub-run may pause for a person (its loop has tools that ask)."""
        return self.loop._may_pause(set() if seen is None else seen)

    def _plainly(self, **args: Any) -> str:
        """A call outside a loop's driver: the loop runs on its own, and nothing rolls up."""
        result = self.loop.run(self.task(self.validate(args)))
        return str(result.answer)

    def __reduce__(self) -> tuple[Any, ...]:
        options = (self.input_type, self.handoff, self.target_name, self.input_filter)
        return (_rebuild, (self.loop, self.name, self.description, *options))


def _rebuild(
    loop: SubLoop,
    name: str,
    description: str,
    input_type: type[pydantic.BaseModel] | None,
    handoff: bool,
    target_name: str,
    input_filter: Callable[[list[Message]], Sequence[Message]] | None,
) -> AgentTool:
    return AgentTool(
        loop,
        name=name,
        description=description,
        input_type=input_type,
        handoff=handoff,
        target_name=target_name,
        input_filter=input_filter,
    )


def agent_tool(
    loop: SubLoop,
    name: str,
    description: str,
    *,
    input_type: type[pydantic.BaseModel] | None = None,
) -> AgentTool:
    """`loop.as_tool(...)`: see `ReActLoop.as_tool`."""
    return AgentTool(loop, name=name, description=description, input_type=input_type)


def paused(run: SubRun | None) -> bool:
    """Whether an outcome's sub-run paused (its calls wait for a person): not an end."""
    return run is not None and run.stop_reason == "approval_required"


def outcome(
    tool: AgentTool,
    effect: StartTool,
    result: Any,
    node: Node,
    seconds: float,
    max_chars: int,
    journal: str | None = None,
) -> ToolOutcome:
    """The outcome a sub-run's result gives its call: the answer (or the typed output, as
    JSON) when it answered, an error saying how it stopped otherwise, and the `SubRun`
    (`journal`: the run id it is journaled under in its loop's own store, if it is)."""
    run = summary(tool, effect, result, node, journal)
    if paused(run):
        names = ", ".join(c.name for c in run.pending)
        text = f"{tool.name} waits for approval of {len(run.pending)} call(s): {names}"
        failed = False
    elif run.stop_reason == "answered":
        text, failed = _answer(result), False
    else:
        text = f"{tool.name} stopped without an answer ({run.stop_reason}: {run.detail})"
        if result.answer:
            text += f"; its last words: {result.answer}"
        failed = True
    return ToolOutcome(content=capped(text, max_chars), is_error=failed, seconds=seconds, run=run)


def summary(
    tool: AgentTool, effect: StartTool, result: Any, node: Node, journal: str | None = None
) -> SubRun:
    """A sub-run's result, as its caller keeps it (`node`: what the tree counted for it;
    `journal`: see `outcome`)."""
    tokens, calls, cost = node.totals()
    del tokens  # the result's usage has the split by kind
    pending: list[ToolCall] = list(getattr(result, "pending_approvals", ()))
    paths = getattr(result, "pending_paths", {}) or {c.id: (result.run_id,) for c in pending}
    stopped = result.stop_reason == "approval_required"
    return SubRun(
        name=tool.name,
        call_id=effect.call.id,
        run_id=result.run_id,
        loop=tool.kind,
        stop_reason=result.stop_reason,
        usage=result.usage,
        model_calls=result.model_calls,
        tool_calls=getattr(result, "tool_calls", calls),
        cost=result.cost if cost is None else cost,
        detail=result.detail,
        answered_by=getattr(result, "answered_by", "") or "",
        pending=tuple(pending),
        paths={k: tuple(v) for k, v in paths.items()},
        state=_state(tool, result, journal) if stopped else None,
    )


def _state(tool: AgentTool, result: Any, journal: str | None) -> dict[str, Any] | None:
    """What resuming a paused sub-run needs when its caller has no store: its journal's
    run id in its loop's own store, or the state its loop keeps in memory."""
    if journal is not None:
        return {"journal": journal}
    return tool.loop._paused_state(result)


def _answer(result: Any) -> str:
    """What the caller's model reads of an answer: the typed output as JSON when the loop
    has one (`output`), else the answer text."""
    output = getattr(result, "output", None)
    if output is None:
        return str(result.answer)
    if isinstance(output, pydantic.BaseModel):
        return output.model_dump_json()
    return json.dumps(output, default=str)


def transcript_task(task: Any) -> Any:
    """A task as stored in a sub-run's header: text, or a transcript's messages as dicts."""
    if isinstance(task, str):
        return task
    from agentloops.messages import message_to_dict

    return [message_to_dict(m) for m in task if isinstance(m, Message)]
