"""The ReWOO plan schema the planner fills: `ReWOOPlan` and its `ReWOOPlanStep`s.

A public module: pickled and stored plans name it. Rule: the schema only (and the
`depends_on` it derives from the placeholders); the checks a plan passes are in `_plan`.
"""

from typing import Any

import pydantic

from agentloops.rewoo._placeholders import references


class ReWOOPlanStep(pydantic.BaseModel):
    """One tool call of a ReWOO plan."""

    model_config = pydantic.ConfigDict(defer_build=True)  # built on first use: fast import

    step_id: str = pydantic.Field(description='"#E1", "#E2", ... in plan order')
    description: str = pydantic.Field(description="what this step finds out, and why")
    tool_name: str = pydantic.Field(description="one of the listed tools")
    tool_args: dict[str, Any] = pydantic.Field(
        description="arguments matching the tool's schema; \"#E<n>\" stands for step n's output"
    )
    depends_on: list[str] = pydantic.Field(
        default_factory=list,
        description=(
            "optional; leave it out and the step waits for exactly the steps whose #E "
            "placeholders its tool_args use. Give it only to also wait for a step whose "
            "output it does not use; it must then list every step it uses too"
        ),
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _null_is_omitted(cls, data: Any) -> Any:
        if isinstance(data, dict) and "depends_on" in data and data["depends_on"] is None:
            return {k: v for k, v in data.items() if k != "depends_on"}
        return data

    @pydantic.model_validator(mode="after")
    def _derive_depends_on(self) -> Any:
        # Omitted: the placeholders say it all. Set through __dict__ so `model_fields_set`
        # still tells a derived list (nothing to check) from one the planner wrote.
        if "depends_on" not in self.model_fields_set:
            derived = [r for r in references(self.tool_args) if r != self.step_id]
            self.__dict__["depends_on"] = derived
        return self


class ReWOOPlan(pydantic.BaseModel):
    """Every tool call needed for the task, written before any of them runs."""

    model_config = pydantic.ConfigDict(defer_build=True)

    steps: list[ReWOOPlanStep]
