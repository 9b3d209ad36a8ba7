"""Token counts and what they cost, the bottom of the package's import graph: every layer
may use them.

`Usage` splits input into uncached, cache-read and cache-write tokens, the split that
correct pricing needs; `Price` is a model's price per million tokens of each kind, and
`Usage.cost(price)` the exact amount in money (`Decimal`, never a float).

Rule: it imports nothing from agentloops.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

__all__ = ["Price", "Usage"]

PER = 1_000_000
"""Prices are per million tokens."""


def as_money(name: str, value: object) -> Decimal:
    """`value` as an exact Decimal: a float goes through its shortest text (0.3 -> 0.3, not
    0.299999...), and a negative, infinite or non-numeric price is refused."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float, str)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{name} must be a finite amount >= 0, got {value!r}")
    return amount


Amount = Decimal | int | float | str
"""A price as given: a float goes through its shortest text, so 0.3 is exactly 0.3."""


@dataclass(frozen=True, init=False, slots=True)
class Price:
    """A model's price per million tokens of each kind, in one currency (US dollars in the
    packaged table), kept as `Decimal`.

    `cache_read` and `cache_write` default to `input`: right for a provider without prompt
    caching, and never below the real price of a cache read. Give `cache_write` for a
    provider that charges more to write the cache (Anthropic: 1.25x input).

    Raises:
        ValueError: a price that is not a finite number >= 0.

    Examples:
        >>> Price(input="3", output="15", cache_read="0.30", cache_write="3.75").cache_read
        Decimal('0.30')
    """

    input: Decimal
    """Per million uncached input tokens."""
    output: Decimal
    """Per million output tokens (thinking included)."""
    cache_read: Decimal
    """Per million input tokens read from the prompt cache (default: `input`)."""
    cache_write: Decimal
    """Per million input tokens written to the prompt cache (default: `input`)."""

    def __init__(
        self,
        *,
        input: Amount,
        output: Amount,
        cache_read: Amount | None = None,
        cache_write: Amount | None = None,
    ):
        base = as_money("Price input", input)
        set_ = object.__setattr__
        set_(self, "input", base)
        set_(self, "output", as_money("Price output", output))
        set_(
            self,
            "cache_read",
            base if cache_read is None else as_money("Price cache_read", cache_read),
        )
        set_(
            self,
            "cache_write",
            base if cache_write is None else as_money("Price cache_write", cache_write),
        )


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

    def cost(self, price: Price) -> Decimal:
        """What these tokens cost at `price`: each kind at its own rate, exactly.

        Examples:
            >>> p = Price(input=3, output=15, cache_read="0.3", cache_write="3.75")
            >>> Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=10_000).cost(p)
            Decimal('0.009')
        """
        total = (
            self.input_tokens * price.input
            + self.output_tokens * price.output
            + self.cache_read_tokens * price.cache_read
            + self.cache_write_tokens * price.cache_write
        )
        return total / PER

    @property
    def total_input_tokens(self) -> int:
        """All input tokens: uncached, cache read and cache write."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        """All input and output tokens."""
        return self.total_input_tokens + self.output_tokens
