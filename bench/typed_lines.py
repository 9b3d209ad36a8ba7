"""The lines a typed ReAct agent takes here and in pydantic-ai, counted on one example.

    .venv/bin/python bench/typed_lines.py      # pydantic-ai from the `bench` extra

Both files (examples/typed_weather.py, bench/typed_lines/pydantic_ai_weather.py) define the
same agent: a `Forecast` output type, a tool that raises `ModelRetry` for a name it does not
know, an output validator that checks the temperature against the tool outputs, and a run.
Counted: the code above `if __name__`, without blank lines, comments, docstrings and the
imports (`import` lines and their continuations). Both are then run on a scripted model of
their own library (the same four replies: a name the tool refuses, the English one, an
answer the validator sends back, the right one), to show they do the same thing.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FILES = {
    "agentloops": ROOT / "examples" / "typed_weather.py",
    "pydantic-ai": ROOT / "bench" / "typed_lines" / "pydantic_ai_weather.py",
}
ANSWER = {"city": "Cologne", "temp_c": 12, "sky": "cloudy"}


def code_lines(path: Path) -> tuple[int, int]:
    """(lines of code, of which imports) above `if __name__`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    imports = 0
    body = []
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            break
        body.append(node)
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        doc = isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant)
        if doc and isinstance(node.value.value, str):  # type: ignore[attr-defined]
            skip |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    source = path.read_text(encoding="utf-8").splitlines()
    last = body[-1].end_lineno or len(source)
    counted = 0
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports += (node.end_lineno or node.lineno) - node.lineno + 1
    for number, line in enumerate(source[:last], 1):
        text = line.strip()
        if text and not text.startswith("#") and number not in skip:
            counted += 1
    return counted, imports


def load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_agentloops() -> Any:
    from agentloops.testing import ScriptedModel, respond_structured, use_tools

    module = load("typed_weather", FILES["agentloops"])
    script = [
        use_tools(("weather", {"city": "Köln"})),
        use_tools(("weather", {"city": "Cologne"})),
        respond_structured({**ANSWER, "temp_c": 13}),
        respond_structured(ANSWER),
    ]
    model = ScriptedModel(script)
    forecast = module.main(model)
    model.assert_complete()
    return forecast


def run_pydantic_ai() -> Any:
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    module = load("pydantic_ai_weather", FILES["pydantic-ai"])
    replies = iter(
        [
            ToolCallPart("weather", {"city": "Köln"}),
            ToolCallPart("weather", {"city": "Cologne"}),
            ToolCallPart("final_result", {**ANSWER, "temp_c": 13}),
            ToolCallPart("final_result", ANSWER),
        ]
    )

    def scripted(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[next(replies)])

    forecast = module.main(FunctionModel(scripted))
    assert next(replies, None) is None  # every reply was asked for
    return forecast


def main() -> int:
    print("| library | lines of code | of which imports | without imports |")
    print("|---|---:|---:|---:|")
    for name, path in FILES.items():
        lines, imports = code_lines(path)
        print(f"| {name} | {lines} | {imports} | {lines - imports} |")
    ours = run_agentloops()
    print(f"\nagentloops:  {ours!r}")
    try:
        theirs = run_pydantic_ai()
    except ImportError as exc:
        print(f"pydantic-ai: not installed ({exc}); install the bench extra to run it")
        return 0
    print(f"pydantic-ai: {theirs!r}")
    assert ours.model_dump() == theirs.model_dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())
