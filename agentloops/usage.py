"""Token counts, the bottom of the package's import graph: every layer may use them.

`Usage` splits input into uncached, cache-read and cache-write tokens, the split that
correct pricing needs.

Rule: it imports nothing from agentloops.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts. `input_tokens` is uncached input only; the cache counts are separate."""

    input_tokens: int = 0
    """Input tokens billed at the full rate (neither read from nor written to the cache)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Input tokens served from the prompt cache."""
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache."""

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_input_tokens(self) -> int:
        """All input tokens: uncached, cache read and cache write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """All input and output tokens."""
        return self.total_input_tokens + self.output_tokens
