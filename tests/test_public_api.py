import re
import subprocess
import sys

import pytest

import agentloops


def test_all_is_sorted_and_unique():
    assert agentloops.__all__ == sorted(agentloops.__all__)
    assert len(set(agentloops.__all__)) == len(agentloops.__all__)


def test_all_matches_the_public_names():
    public = {
        name
        for name in vars(agentloops)
        if not name.startswith("_")
        and not isinstance(getattr(agentloops, name), type(agentloops))  # submodules
    }
    assert public == set(agentloops.__all__) - set(getattr(agentloops, "_LAZY", {}))
    assert set(agentloops._LAZY) <= set(agentloops.__all__)  # lazy names are public too
    for name in agentloops.__all__:
        assert getattr(agentloops, name) is not None


def test_contract_names_are_exported():
    contract = [
        "AgentLoopsError",
        "ConfigurationError",
        "Message",
        "ModelClient",
        "ModelError",
        "ModelOutputError",
        "ModelRequest",
        "ModelResponse",
        "OutputSchema",
        "PlanValidationError",
        "ReActLoop",
        "ReActResult",
        "StepLimitExceeded",
        "BudgetExceeded",
        "ApprovalRequired",
        "Text",
        "Thinking",
        "RedactedThinking",
        "ToolCall",
        "ToolRegistry",
        "ToolResult",
        "TranscriptError",
        "Usage",
        "tool",
    ]
    missing = [n for n in contract if n not in agentloops.__all__]
    assert missing == []


def test_import_has_no_heavy_side_effects():
    code = (
        "import sys, agentloops; "
        "print(','.join(m for m in ('anthropic', 'httpx', 'httpx2', 'opentelemetry', 'distributed')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_version_is_the_installed_distributions():
    from importlib.metadata import version

    assert agentloops.__version__ == version("agentloops-kit")
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", agentloops.__version__)


def test_dir_lists_every_public_name_the_lazy_ones_too():
    names = dir(agentloops)
    assert names == sorted(names)
    assert set(agentloops.__all__) <= set(names)
    assert {"__version__", "compare", "ReWOOPipeline", "AnthropicModel"} <= set(names)


def test_unknown_names_still_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        agentloops.NoSuchThing  # noqa: B018


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_comparison_harness_loads_on_first_access_only():
    code = "import sys, agentloops; print('agentloops.comparison' in sys.modules)"
    assert _fresh(code) == "False"


@pytest.mark.parametrize(
    "first",
    [
        "",
        "from agentloops.comparison import Attempt",  # the module first: no shadowing
        "import agentloops.comparison",
        "from agentloops import Comparison",
    ],
)
def test_compare_is_the_function_whatever_was_imported_first(first: str):
    code = (
        f"{first}\n"
        "import agentloops\n"
        "from agentloops import compare\n"
        "import agentloops.comparison as module\n"
        "print(compare is agentloops.compare is module.compare, callable(agentloops.compare))"
    )
    assert _fresh(code) == "True True"


def test_every_public_name_reports_a_public_module() -> None:
    """Pickled or stored records must never name a private module (renaming it would break
    them), so each public class and function says where users import it from."""
    import pickle

    private = {
        name: obj.__module__
        for name in agentloops.__all__
        if (obj := getattr(agentloops, name)) is not None
        and isinstance(getattr(obj, "__module__", None), str)
        and any(part.startswith("_") for part in obj.__module__.split("."))
    }
    assert private == {}
    records = [agentloops.ReActResult, agentloops.ReWOOPlan, agentloops.PlanExecuteResult]
    assert [pickle.loads(pickle.dumps(r)) for r in records] == records


def test_help_shows_no_prompt_in_a_signature() -> None:
    """Default prompts are `None` in the signatures; the text lives in module constants."""
    import inspect

    for cls in (
        agentloops.PlanAndExecute,
        agentloops.ReWOOPipeline,
        agentloops.Router,
        agentloops.Evaluator,
    ):
        signature = str(inspect.signature(cls))
        assert "You are" not in signature and len(signature) < 1200, cls.__name__
