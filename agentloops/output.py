"""Typed answers: a loop's `output_type` as the JSON Schema the model fills, the checks of
what it wrote, and what an `output_validator` is given.

ReAct, ReWOO and Plan-and-Execute take `output_type=` (a pydantic model, or any type pydantic
validates: a list of models, a `Literal`, a union), `output_validator=` and
`max_output_retries=`. How the model is asked (native JSON output, a prompt, a final-answer
tool next to the real tools) is the model client's choice (`OutputSchema`); what comes back
is checked here, the same way for all three loops. A schema whose root is not an object is
wrapped as `{"result": ...}`, so every mechanism gets an object.

Rule: above the engine, below structured output and the loops; it knows no loop and no
provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pydantic

from agentloops._json_text import json_in
from agentloops._text import cut
from agentloops._validation import field_errors
from agentloops.engine.effects import CheckOutput, Emit, Machine, OutputTarget
from agentloops.errors import AgentLoopsError, ConfigurationError, ModelRetry, RunError
from agentloops.events import OutputDelta
from agentloops.messages import Message, Text
from agentloops.model import OUTPUT_TOOL, ModelResponse, OutputSchema
from agentloops.tools import INVALID_ARGUMENTS
from agentloops.usage import Usage

T = TypeVar("T")

WRAP_KEY = "result"
"""The key a non-object output is wrapped under."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputContext:
    """What an `output_validator` is given besides the answer."""

    run_id: str
    loop: str
    """"react", "rewoo" or "plan_execute"."""
    messages: list[Message]
    """The transcript so far (a copy), the answer's turn last: a ReAct run's whole
    transcript (its tool results included), the solver's or reporter's for the others."""
    usage: Usage
    """Tokens the run has spent so far, this answer included."""
    retries: int
    """How many answers of this run were rejected before this one."""


OutputValidator = Callable[[Any, OutputContext], Any]
"""`validator(output, context)`, sync or `async`: returns the output (possibly changed; `None`
keeps it as it is) or raises `agentloops.ModelRetry("what is wrong")`."""


class OutputSpec(Generic[T]):
    """One output type: the `OutputSchema` the model is asked to fill, and its validation.

    Raises:
        ConfigurationError: pydantic cannot make a JSON Schema for the type.
    """

    __slots__ = ("adapter", "key", "schema", "target", "type")

    def __init__(self, output_type: type[T] | Any, *, tool: str = OUTPUT_TOOL):
        try:
            self.adapter: pydantic.TypeAdapter[T] = pydantic.TypeAdapter(output_type)
            if isinstance(output_type, type) and issubclass(output_type, pydantic.BaseModel):
                schema = output_type.model_json_schema()  # as ask_structured has always sent
            else:
                schema = self.adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise ConfigurationError(f"output_type={output_type!r}: {exc}") from exc
        self.type = output_type
        self.key = None if schema.get("type") == "object" else WRAP_KEY
        if self.key is not None:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {self.key: schema}, "required": [self.key]}
            if defs:
                schema["$defs"] = defs
        name = output_type.__name__ if isinstance(output_type, type) else "Output"
        self.schema = OutputSchema(name, schema, tool=tool)
        self.target = OutputTarget(tool, self.key)

    def parse(self, response: ModelResponse) -> T:
        """The answer in a reply, validated: the client's `output`, the final-answer tool's
        arguments, or the JSON in its text.

        Raises:
            pydantic.ValidationError: the answer does not match the type.
            ValueError: a refusal, a reply with no JSON, or JSON of the wrong shape.
        """
        if response.stop_reason == "refusal":
            raise ValueError("the model refused to answer")
        data = response.output
        if data is None:
            data = next((c.args for c in response.message.tool_calls if c.name == self.tool), None)
        if data is None:
            text = json_in(response.message.text)
            if not text:
                raise ValueError("the reply held no JSON")
            if self.key is None:
                return self.adapter.validate_json(text)
            data = json.loads(text)
        return self.validate(data)

    def validate(self, data: Any) -> T:
        """`data` (the JSON the model wrote, or a value an output validator returned) as the
        output type."""
        if isinstance(data, dict) and INVALID_ARGUMENTS in data:
            raise ValueError(str(data[INVALID_ARGUMENTS]))
        if self.key is not None:
            if not isinstance(data, dict) or self.key not in data:
                raise ValueError(f"the answer must be a JSON object with the key {self.key!r}")
            data = data[self.key]
        return self.adapter.validate_python(data)

    def accept(self, value: Any) -> T:
        """A value an output validator returned (or its journaled JSON), as the output type."""
        return self.adapter.validate_python(value)

    def dump(self, value: T) -> Any:
        """The output as JSON data."""
        return self.adapter.dump_python(value, mode="json")

    def text(self, value: T) -> str:
        """The output as JSON text: a typed run's `answer`."""
        return json.dumps(self.dump(value), ensure_ascii=False)

    @property
    def tool(self) -> str:
        return self.schema.tool


MAX_ERRORS_CHARS = 4000
"""The validation errors sent back to the model are cut to this (head and tail)."""


def problem(exc: Exception) -> str:
    """What was wrong with an answer, as the model is told it (cut to `MAX_ERRORS_CHARS`)."""
    if isinstance(exc, pydantic.ValidationError):
        text = "; ".join(field_errors(exc, root="(root)", width=None))
    else:
        text = str(exc)
    return cut(text, MAX_ERRORS_CHARS, "[... {cut} of {total} characters of errors cut ...]")


def free_tool_name(names: Any) -> str:
    """`final_answer`, or `final_answer_2`, ... when a tool of the loop already has the name."""
    taken = set(names)
    name, n = OUTPUT_TOOL, 1
    while name in taken:
        n += 1
        name = f"{OUTPUT_TOOL}_{n}"
    return name


def output_spec(
    output_type: Any, validator: OutputValidator | None, max_retries: int, tools: Any = ()
) -> OutputSpec[Any] | None:
    """A loop's output settings checked at construction (`None` for a loop without a type).

    Raises:
        ConfigurationError: a validator without a type, a negative `max_output_retries`, a
            validator that is not callable, or a type pydantic cannot describe.
    """
    if max_retries < 0:
        raise ConfigurationError(f"max_output_retries must be >= 0, got {max_retries}")
    if validator is not None and not callable(validator):
        raise ConfigurationError(f"output_validator must be callable, got {validator!r:.60}")
    if output_type is None:
        if validator is not None:
            raise ConfigurationError("output_validator needs an output_type to validate")
        return None
    return OutputSpec(output_type, tool=free_tool_name(tools))


def checked(
    spec: OutputSpec[T],
    validator: OutputValidator,
    value: T,
    context: OutputContext,
    step: int,
) -> Machine[T]:
    """Ask the driver to run `validator` on `value` (`CheckOutput`): the value it keeps.

    Raises:
        ModelRetry: the validator asks for another answer (the caller sends it back).
        RunError: the validator raised anything else, or returned a value that is not of
            the output type (a bug to fix, not an answer to retry); the cause is chained.
    """
    effect = CheckOutput(validator, value, context, context.loop, context.run_id, step)
    try:
        kept = yield effect
    except (ModelRetry, AgentLoopsError):
        raise
    except Exception as exc:
        raise RunError(f"output_validator raised {type(exc).__name__}: {exc}") from exc
    if kept is None:
        return value
    try:
        return spec.accept(kept)
    except pydantic.ValidationError as exc:
        raise RunError(
            f"output_validator returned a value that is not a valid {spec.schema.name}: "
            f"{problem(exc)}"
        ) from exc


def accepted(spec: OutputSpec[T], value: T, loop: str, run_id: str) -> Emit:
    """The last `OutputDelta` of a run: the accepted output."""
    return Emit(
        OutputDelta(loop=loop, run_id=run_id, data=spec.dump(value), output=value, final=True)
    )


def sendable(reply: Message) -> Message:
    """A rejected reply as it can go back: a blank turn would be refused, so it says so."""
    blocks = tuple(b for b in reply.content if type(b) is not Text or b.text.strip())
    if blocks == reply.content:
        return reply
    return Message("assistant", blocks or (Text("(empty reply)"),))
