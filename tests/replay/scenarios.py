"""The recorded runs of the corpus: how each was made, and what replaying it must give.

A `Scenario` names the loop (loops.py), the task and run id, the resumes the recording
made and where its process died; record.py runs it and writes its `expect` into the
file, where it stays with the journal. The expectations are written here by hand, from
what each run is meant to do, not copied from a recording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replay.loops import PE_REPORTS, REACT_TURNS, REWOO_ANSWER, WEATHER


@dataclass(frozen=True)
class Scenario:
    """One recorded run: how it was made, and what replaying it must give."""

    name: str
    loop: str
    """A key of `LOOPS`, and the run's kind."""
    task: str
    run_id: str
    die_in: str | None = None
    """Where the recording's process dies, once (a tool's name or a model purpose)."""
    resumes: tuple[dict[str, bool | str] | None, ...] = ()
    """The decisions of each `resume` the recording made after the run, in order."""
    expect: dict[str, Any] = field(default_factory=dict)
    """`status`: what `status(run_id)` gives; `refused`: the calls a resume without
    decisions stops at (`CallInDoubt`); `resume`: the decisions, and what resuming with
    them gives and asks for (`asked`: the model's purposes; `ran`: the tool calls)."""


def _call(id_: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": id_, "name": name, "args": args}


SCENARIOS = [
    Scenario(
        "react_finished",
        "react",
        "Compare the weather in Paris and Rome.",
        "react-finished",
        expect={
            "status": {
                "stop_reason": "answered",
                "answer": REACT_TURNS["Compare the weather in Paris and Rome."][-1].answer,
                "model_calls": 2,
                "tool_calls": 2,
            },
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": REACT_TURNS["Compare the weather in Paris and Rome."][-1].answer,
                "asked": [],
                "ran": [],
            },
        },
    ),
    Scenario(
        "react_paused",
        "react",
        "Pay invoice INV-7.",
        "react-paused",
        expect={
            "status": {
                "stop_reason": "approval_required",
                "pending": [_call("c2", "pay", {"invoice": "INV-7", "amount": 120})],
                "model_calls": 2,
                "tool_calls": 1,
            },
            "resume": {
                "decisions": {"c2": True},
                "stop_reason": "answered",
                "answer": "Paid INV-7: 120 EUR to ACME.",
                "model_calls": 3,
                "asked": ["answer"],
                "ran": [["pay", "react-paused:c2"]],
            },
        },
    ),
    Scenario(
        "react_in_doubt",
        "react",
        "Send 100 EUR to Bob.",
        "react-in-doubt",
        die_in="transfer",
        resumes=(None,),  # someone resumed it, and it stopped at the call in doubt
        expect={
            "status": {"stop_reason": "running", "model_calls": 1},
            "refused": [_call("t1", "transfer", {"to": "Bob", "amount": 100})],
            "resume": {
                "decisions": {"t1": "rerun"},
                "stop_reason": "answered",
                "answer": "Sent 100 EUR to Bob.",
                "model_calls": 2,
                "asked": ["answer"],
                "ran": [["transfer", "react-in-doubt:t1"]],
            },
        },
    ),
    Scenario(
        "react_approved_partway",
        "react",
        "Pay invoice INV-7.",
        "react-approved",
        die_in="answer",  # approved, paid, then died asking for the answer
        resumes=({"c2": True},),
        expect={
            "status": {"stop_reason": "running", "model_calls": 2, "tool_calls": 2},
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": "Paid INV-7: 120 EUR to ACME.",
                "model_calls": 3,
                "asked": ["answer"],
                "ran": [],
            },
        },
    ),
    Scenario(
        "react_partway",
        "react",
        "What should I wear in Paris?",
        "react-partway",
        die_in="c2",  # the second model call: the journal ends at the first call's outcome
        expect={
            "status": {"stop_reason": "running", "model_calls": 1, "tool_calls": 1},
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": "Take an umbrella: 18C and light rain.",
                "model_calls": 3,
                "asked": ["c2", "answer"],
                "ran": [["advice", "react-partway:c2"]],
            },
        },
    ),
    Scenario(
        "rewoo_finished",
        "rewoo",
        "Is Paris or Rome warmer, and what should I wear in Atlantis?",
        "rewoo-finished",
        expect={
            "status": {
                "stop_reason": "answered",
                "answer": REWOO_ANSWER,
                "model_calls": 2,
                "evidence": {
                    "#E1": [WEATHER["Paris"], False],
                    "#E2": ["'weather' failed: LookupError: no such city: Atlantis", True],
                    "#E3": [WEATHER["Rome"], False],
                    "#E4": ["Rome", False],
                    "#E5": [None, True],  # None: the worker words it, the journal does not hold it
                },
                "skipped": ["#E5"],
            },
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": REWOO_ANSWER,
                "asked": [],
                "ran": [],
            },
        },
    ),
    Scenario(
        "rewoo_partway",
        "rewoo",
        "Is Paris or Rome warmer, and what should I wear in Atlantis?",
        "rewoo-partway",
        die_in="warmer",  # the journal ends at #E4's start: a read-only call in doubt
        expect={
            "status": {
                "stop_reason": "running",
                "model_calls": 1,
                "evidence": {
                    "#E1": [WEATHER["Paris"], False],
                    "#E2": ["'weather' failed: LookupError: no such city: Atlantis", True],
                    "#E3": [WEATHER["Rome"], False],
                },
            },
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": REWOO_ANSWER,
                "model_calls": 2,
                "asked": ["solve"],
                "ran": [["warmer", "rewoo-partway:plan0:#E4"]],
            },
        },
    ),
    Scenario(
        "plan_execute_finished",
        "plan_execute",
        "Compare the weather in Paris and Rome.",
        "pe-finished",
        expect={
            "status": {
                "stop_reason": "answered",
                "answer": PE_REPORTS["Compare the weather in Paris and Rome."],
                "model_calls": 6,
                "tool_calls": 2,
                "step_status": ["done", "done"],
            },
            "resume": {
                "decisions": None,
                "stop_reason": "answered",
                "answer": PE_REPORTS["Compare the weather in Paris and Rome."],
                "asked": [],
                "ran": [],
            },
        },
    ),
    Scenario(
        "plan_execute_paused",
        "plan_execute",
        "Settle invoice INV-7.",
        "pe-paused",
        expect={
            "status": {
                "stop_reason": "approval_required",
                "pending": [_call("c1", "pay", {"invoice": "INV-7", "amount": 120})],
                "step_status": ["done", "paused"],
            },
            "resume": {
                "decisions": {"c1": True},
                "stop_reason": "answered",
                "answer": PE_REPORTS["Settle invoice INV-7."],
                "model_calls": 6,
                "asked": ["2:answer", "report"],
                "ran": [["pay", "pe-paused.2:c1"]],
            },
        },
    ),
]
