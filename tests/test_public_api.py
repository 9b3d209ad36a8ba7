import subprocess
import sys

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
