"""Which model plays each role: chosen from the flags, saved with the run, rebuilt on resume.

A run remembers its model settings (provider, base URL, model names, structured-output
mode, token limit; never an API key), so `--resume RUN_ID` continues on the same model
without retyping them, and never silently on a different one.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentloops import ModelClient
from market_analyst.demo_model import MODEL_NAME, DemoModel

Provider = Literal["offline", "openai_compat", "anthropic", "custom"]
DEFAULT_OPENAI_MODEL = "qwen3:8b"
_FIELDS = (
    "model",
    "planner_model",
    "executor_model",
    "structured",
    "max_tokens",
    "timeout",
    "context_window",
)


class MissingCredentials(RuntimeError):
    """The saved settings need an API key this process does not have."""


@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    """What a run was started with. `custom` is a client passed in code (tests)."""

    provider: Provider
    model: str | None = None
    base_url: str | None = None
    planner_model: str | None = None
    executor_model: str | None = None
    structured: str | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    """Seconds one model call may take (the client's own default when `None`)."""
    context_window: int | None = None
    """The model's context window in tokens: the research and the evaluator compact what
    the model sees to stay within it (`agentloops.Compaction`); `None`: no compaction."""

    def describe(self) -> str:
        """For the screen and the record, e.g. "qwen3:8b at http://localhost:11434/v1"."""
        if self.provider == "offline":
            return MODEL_NAME
        if self.provider == "custom":
            return self.model or "a model supplied in code"
        name = f"{self.model} at {self.base_url}" if self.base_url else f"Claude ({self.model})"
        roles = [f"planner {self.planner_model}"] if self.planner_model else []
        roles += [f"executor {self.executor_model}"] if self.executor_model else []
        return name + (f"; {', '.join(roles)}" if roles else "")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSettings:
        known: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        return cls(**known)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in _FIELDS if getattr(args, k, None) is not None}


def from_args(args: argparse.Namespace, saved: dict[str, Any] | None = None) -> ModelSettings:
    """The settings for this process: flags given now win; then the run's saved settings
    (on `--resume`); then the environment (a Claude key); else the offline stand-in."""
    given = _given(args)
    if args.offline:
        return ModelSettings(provider="offline")
    if args.base_url:
        server = ModelSettings(
            provider="openai_compat", base_url=args.base_url, model=DEFAULT_OPENAI_MODEL
        )
        return dataclasses.replace(server, **given)
    if saved and saved.get("provider") not in (None, "custom"):
        return dataclasses.replace(ModelSettings.from_dict(saved), **given)
    if os.environ.get("ANTHROPIC_API_KEY"):
        return dataclasses.replace(ModelSettings(provider="anthropic"), **given)
    return ModelSettings(provider="offline")


def ignored_flags(args: argparse.Namespace, settings: ModelSettings) -> list[str]:
    """Model flags that do nothing with these settings (to say so, not to guess)."""
    given = _given(args)
    if settings.provider == "offline":
        return [f"--{k.replace('_', '-')}" for k in given]
    if settings.provider == "anthropic":
        return [f"--{k}" for k in ("structured", "timeout") if k in given]
    return []


@dataclass(frozen=True)
class Clients:
    """One client per role; `planner` and `executor` are `main` unless set apart."""

    main: ModelClient
    planner: ModelClient
    executor: ModelClient
    settings: ModelSettings


def build(settings: ModelSettings) -> Clients:
    """The clients for `settings`.

    Raises:
        MissingCredentials: Claude without ANTHROPIC_API_KEY.
        ConfigurationError: a setting the client refuses (e.g. an unknown --structured).
    """
    if settings.provider == "offline":
        demo = DemoModel()
        return Clients(demo, demo, demo, settings)
    if settings.provider == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise MissingCredentials(
                "this run uses Claude: set ANTHROPIC_API_KEY to continue it, or pass "
                "--offline (or --base-url URL) to continue on another model"
            )
        from agentloops.providers.anthropic import AnthropicModel

        limit: dict[str, Any] = {}
        if settings.max_tokens:
            limit["max_tokens"] = settings.max_tokens

        def claude(name: str | None) -> ModelClient:
            return AnthropicModel(name, **limit) if name else AnthropicModel(**limit)

        main = claude(settings.model)
        settings = dataclasses.replace(settings, model=getattr(main, "model", settings.model))
        return Clients(main, *_roles(settings, main, claude), settings)
    if settings.provider == "openai_compat":
        from agentloops.providers.openai_compat import OpenAICompatModel

        key = os.environ.get("OPENAI_API_KEY")
        options: dict[str, Any] = {"api_key": key, "max_tokens": settings.max_tokens}
        if settings.timeout:
            options["timeout"] = settings.timeout
        if settings.structured:
            options["structured"] = settings.structured

        url = str(settings.base_url)

        def server(name: str | None) -> ModelClient:
            return OpenAICompatModel(url, name or DEFAULT_OPENAI_MODEL, **options)

        main = server(settings.model)
        return Clients(main, *_roles(settings, main, server), settings)
    raise MissingCredentials(
        "this run was started with a model supplied in code; pass --offline, --base-url "
        "URL, or set ANTHROPIC_API_KEY to continue it"
    )


def _roles(
    settings: ModelSettings, main: ModelClient, make: Callable[[str | None], ModelClient]
) -> tuple[ModelClient, ModelClient]:
    planner = make(settings.planner_model) if settings.planner_model else main
    executor = make(settings.executor_model) if settings.executor_model else main
    return planner, executor
