"""What a model's tokens cost: the packaged price table (`prices.json`), the user's own
prices on top of it, and the rule that turns a client into a price per response.

The table is read on the first look-up, never at `import agentloops`. A price given on a
loop (`price=`) beats one given on a client (`AnthropicModel(price=...)`), which beats
this table; `set_price` and `load_prices` change the table for the whole process.

Rule: no I/O at import, and nothing above the model boundary (no engine, no loop).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentloops.errors import ConfigurationError
from agentloops.model import ModelResponse
from agentloops.usage import Price

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Pricer", "known_price", "load_prices", "pricer", "prices_of", "set_price"]

_DATED = re.compile(r"(-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$")
"""A model id's date (or `-latest`) suffix: `claude-haiku-4-5-20251001` is priced as
`claude-haiku-4-5`, `gpt-4o-2024-08-06` as `gpt-4o`."""

_lock = threading.Lock()
_table: dict[str, Price] | None = None

Pricer = Callable[[ModelResponse], Price]
"""The price of the tokens of one response."""


def _prices(data: Mapping[str, Any], where: str) -> dict[str, Price]:
    table: dict[str, Price] = {}
    for model, figures in data.items():
        if model.startswith("_"):
            continue  # a note, not a model
        try:
            table[model] = Price(**figures)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"{where}: the price of {model!r} is invalid: {exc}") from None
    return table


def _loaded() -> dict[str, Price]:
    global _table
    with _lock:
        if _table is None:
            import json  # with the first look-up: `import agentloops` stays cheap
            from pathlib import Path

            path = Path(__file__).with_name("prices.json")
            _table = _prices(json.loads(path.read_text(encoding="utf-8")), str(path))
        return _table


def known_price(model: str) -> Price | None:
    """The table's price for `model` (also under its undated name), or `None`.

    Examples:
        >>> known_price("claude-haiku-4-5-20251001").output
        Decimal('5')
    """
    table = _loaded()
    return table.get(model) or table.get(_DATED.sub("", model))


def set_price(model: str, price: Price | None) -> None:
    """Add or replace `model`'s price in this process's table (`None` removes it)."""
    table = _loaded()
    with _lock:
        if price is None:
            table.pop(model, None)
        else:
            table[model] = price


def load_prices(path: str | Path) -> None:
    """Add or replace the prices in a JSON file shaped like the packaged one:
    `{"model": {"input": "3", "output": "15", "cache_read": "0.3", "cache_write": "3.75"}}`.

    Raises:
        ConfigurationError: the file is not such a JSON object, or a price is invalid.
    """
    import json
    from pathlib import Path

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read prices from {path}: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) for k, v in data.items() if k[:1] != "_"
    ):
        raise ConfigurationError(f"{path}: prices must be a JSON object of model -> prices")
    for model, price in _prices(data, str(path)).items():
        set_price(model, price)


def prices_of(client: object) -> dict[str, Price | None]:
    """Each model `client` may answer with, and its price (`None`: unknown).

    A client that wraps others (`FallbackModel`, `RateLimiter`) says so with a `prices()`
    method; any other is priced by its `price` attribute, else by its `model` in the table.
    """
    own = getattr(client, "prices", None)
    if callable(own):
        listed: dict[str, Price | None] = own()
        return listed
    model = getattr(client, "model", None)
    price = getattr(client, "price", None)
    if isinstance(price, Price):
        return {model if isinstance(model, str) and model else type(client).__name__: price}
    if isinstance(model, str) and model:
        return {model: known_price(model)}
    return {type(client).__name__: None}


def pricer(client: object, price: Price | Mapping[str, Price | None] | None = None) -> Pricer:
    """How a run prices each response of `client`: by `price` when given (one `Price`, or one
    per model name), else by the client's own prices.

    A response is priced by the model that answered (`response.model`, dated or not);
    one that names none of them is priced at the dearest rate of each kind among them,
    so a cost cap never counts a call for less than it may have cost.

    Raises:
        ConfigurationError: a model the client may answer with has no known price.
    """
    if isinstance(price, Price):
        return _Fixed(price)
    table: dict[str, Price | None] = dict(price) if price is not None else prices_of(client)
    missing = sorted(name for name, p in table.items() if p is None)
    if missing or not table:
        raise ConfigurationError(
            f"no known price for {', '.join(missing) or type(client).__name__}: a cost cap "
            "needs one for every model that may answer; give price=Price(input=..., "
            "output=..., cache_read=..., cache_write=...) per million tokens on the loop or "
            "the client, or add it with agentloops.pricing.set_price"
        )
    known: dict[str, Price] = {name: p for name, p in table.items() if p is not None}
    if len(known) == 1:
        return _Fixed(next(iter(known.values())))
    return _ByModel(known)


class _Fixed:
    """One price for every response (a plain class, so a loop holding it pickles)."""

    __slots__ = ("price",)

    def __init__(self, price: Price):
        self.price = price

    def __call__(self, response: ModelResponse) -> Price:
        return self.price


class _ByModel:
    """The price of the model that answered; the dearest rate of each kind for a reply
    that names none of them."""

    __slots__ = ("ceiling", "known")

    def __init__(self, known: dict[str, Price]):
        self.known = known
        prices = known.values()
        self.ceiling = Price(
            input=max(p.input for p in prices),
            output=max(p.output for p in prices),
            cache_read=max(p.cache_read for p in prices),
            cache_write=max(p.cache_write for p in prices),
        )

    def __call__(self, response: ModelResponse) -> Price:
        name, known = response.model, self.known
        return known.get(name) or known.get(_DATED.sub("", name)) or self.ceiling
