"""How servers say a prompt does not fit the model's context window, and the numbers they
give: pure functions over an error body's text, shared by both providers.

The wordings (each seen in a real server's error body):

- Anthropic: `prompt is too long: 210000 tokens > 200000 maximum`
- OpenAI, vLLM, llama-cpp-python's server (code `context_length_exceeded`): `This model's
  maximum context length is 8192 tokens. However, you requested 8204 tokens (7180 in the
  messages, 1024 in the completion).`; OpenAI also `... your messages resulted in N tokens`,
  vLLM also `... and your request has N input tokens`
- llama.cpp's llama-server, and Ollama, which passes its runner's error on (type
  `exceed_context_size_error`, with `n_prompt_tokens` and `n_ctx`): `request (4476 tokens)
  exceeds the available context size (4096 tokens)`
- llama-cpp-python itself, when a server passes its error on: `Requested tokens (9437)
  exceed context window of 8192`

Rule: no I/O and no state.
"""

from __future__ import annotations

import re

MARKERS = (
    "context_length_exceeded",  # OpenAI's error code (llama-cpp-python's server sends it too)
    "maximum context length",  # OpenAI, vLLM, llama-cpp-python's server
    "exceed_context_size",  # llama-server's (and Ollama's) error type
    "exceeds the available context size",  # llama-server, Ollama
    "exceed context window",  # llama-cpp-python
    "prompt is too long",  # Anthropic, and gateways in front of it
)
"""How servers say a prompt does not fit the model's context window (lower case)."""

_PAIRS = (
    # (tokens, limit) in that order
    re.compile(r"prompt is too long: (\d+) tokens > (\d+)"),
    re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    re.compile(r"requested tokens \((\d+)\) exceed context window of (\d+)"),
)
_LIMIT = re.compile(r"maximum context length is (\d+)")
_TOKENS = re.compile(
    r"(?:you requested|resulted in|your request has|\"n_prompt_tokens\"\s*:)\s*(\d+)"
)
_N_CTX = re.compile(r"\"n_ctx\"\s*:\s*(\d+)")


def too_long(text: str) -> bool:
    """Whether an error body says the prompt does not fit the context window."""
    lowered = text.lower()
    return any(marker in lowered for marker in MARKERS)


def numbers(text: str) -> tuple[int | None, int | None]:
    """The request's size and the window's, in tokens, where the error body gives them.

    Examples:
        >>> numbers("prompt is too long: 210000 tokens > 200000 maximum")
        (210000, 200000)
        >>> numbers("This model's maximum context length is 8192 tokens. However, you "
        ...         "requested 8204 tokens (7180 in the messages, 1024 in the completion).")
        (8204, 8192)
        >>> numbers("something else")
        (None, None)
    """
    lowered = text.lower().replace('\\"', '"')  # a body quoted inside another (Ollama)
    for pair in _PAIRS:
        found = pair.search(lowered)
        if found:
            return int(found.group(1)), int(found.group(2))
    tokens = _TOKENS.search(lowered)
    limit = _LIMIT.search(lowered) or _N_CTX.search(lowered)
    return (
        int(tokens.group(1)) if tokens else None,
        int(limit.group(1)) if limit else None,
    )
