"""Money: `Price`, `Usage.cost` against figures worked out by hand, the packaged price table,
the user's prices on top of it, and how a client's responses are priced."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from agentloops import (
    ConfigurationError,
    FallbackModel,
    Message,
    ModelResponse,
    Price,
    Usage,
    pricing,
)
from agentloops.testing import ScriptedModel

SONNET = Price(input="3", output="15", cache_read="0.30", cache_write="3.75")


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # 1,234 uncached input tokens at $3 per million: 1234 * 3 / 1e6 = 0.003702
        (Usage(input_tokens=1234), "0.003702"),
        # 567 output tokens at $15 per million: 567 * 15 / 1e6 = 0.008505
        (Usage(output_tokens=567), "0.008505"),
        # 89,000 cache-read tokens at $0.30: 89000 * 0.3 / 1e6 = 0.0267
        (Usage(cache_read_tokens=89_000), "0.0267"),
        # 4,321 cache-write tokens at $3.75: 4321 * 3.75 / 1e6 = 0.01620375
        (Usage(cache_write_tokens=4_321), "0.01620375"),
        # all four: 0.003702 + 0.008505 + 0.0267 + 0.01620375 = 0.05511075
        (
            Usage(
                input_tokens=1234,
                output_tokens=567,
                cache_read_tokens=89_000,
                cache_write_tokens=4_321,
            ),
            "0.05511075",
        ),
        (Usage(), "0"),
    ],
)
def test_cost_is_exact_for_each_token_kind(usage: Usage, expected: str) -> None:
    cost = usage.cost(SONNET)
    assert isinstance(cost, Decimal)
    assert cost == Decimal(expected)


def test_a_million_runs_of_a_tiny_call_add_up_exactly() -> None:
    one = Usage(input_tokens=1, output_tokens=1).cost(Price(input="0.1", output="0.2"))
    assert one == Decimal("0.0000003")
    assert sum([one] * 1_000_000, Decimal(0)) == Decimal("0.3")  # no float drift


def test_price_takes_numbers_and_text_and_keeps_decimals() -> None:
    p = Price(input=0.1, output=2, cache_read="0.01")
    assert (p.input, p.output, p.cache_read) == (Decimal("0.1"), Decimal(2), Decimal("0.01"))
    assert p.cache_write == p.input  # defaults to the input price


@pytest.mark.parametrize("bad", [-1, "x", float("nan"), float("inf"), True, None, [1]])
def test_a_price_that_is_not_a_finite_amount_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="Price input"):
        Price(input=bad, output=1)  # type: ignore[arg-type]


def test_the_packaged_table_prices_the_models_the_docs_name() -> None:
    assert pricing.known_price("claude-sonnet-5") == Price(
        input="2", output="10", cache_read="0.2", cache_write="2.5"
    )
    assert pricing.known_price("gpt-4o-mini") == Price(
        input="0.15", output="0.6", cache_read="0.075"
    )
    # dated ids are priced as their model
    assert pricing.known_price("claude-haiku-4-5-20251001") == pricing.known_price(
        "claude-haiku-4-5"
    )
    assert pricing.known_price("gpt-4o-2024-08-06") == pricing.known_price("gpt-4o")
    assert pricing.known_price("qwen3:8b") is None  # a local model: no price to guess


def test_set_price_and_load_prices_extend_and_override(tmp_path: Path) -> None:
    mine = Price(input=1, output=2)
    pricing.set_price("qwen3:8b", mine)
    try:
        assert pricing.known_price("qwen3:8b") == mine
        path = tmp_path / "prices.json"
        path.write_text(json.dumps({"qwen3:8b": {"input": "0", "output": "0"}}))
        pricing.load_prices(path)
        assert pricing.known_price("qwen3:8b") == Price(input=0, output=0)
    finally:
        pricing.set_price("qwen3:8b", None)
    assert pricing.known_price("qwen3:8b") is None


@pytest.mark.parametrize(
    "content", ["[1]", "not json", '{"m": {"input": "-1", "output": "1"}}', '{"m": 3}']
)
def test_load_prices_refuses_a_file_that_is_not_prices(tmp_path: Path, content: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError):
        pricing.load_prices(path)


def test_load_prices_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        pricing.load_prices(tmp_path / "missing.json")


def reply(model: str) -> ModelResponse:
    return ModelResponse(Message("assistant", ()), "end_turn", model=model)


def test_a_client_is_priced_by_its_price_then_by_the_table() -> None:
    class Named:
        model = "claude-haiku-4-5"

        def complete(self, request: object) -> ModelResponse:  # pragma: no cover
            raise NotImplementedError

    assert pricing.pricer(Named())(reply("x")) == pricing.known_price("claude-haiku-4-5")
    priced = Named()
    priced.price = SONNET  # type: ignore[attr-defined]
    assert pricing.pricer(priced)(reply("x")) == SONNET
    assert pricing.pricer(Named(), SONNET)(reply("x")) == SONNET  # the loop's price wins


def test_a_client_with_no_known_price_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="no known price for ScriptedModel"):
        pricing.pricer(ScriptedModel([]))


def test_a_fallback_chain_is_priced_by_the_model_that_answered() -> None:
    a, b = ScriptedModel([]), ScriptedModel([])
    a.model, b.model = "claude-sonnet-5", "claude-haiku-4-5"  # type: ignore[attr-defined]
    price_of = pricing.pricer(FallbackModel([a, b]))
    assert price_of(reply("claude-haiku-4-5-20251001")) == pricing.known_price("claude-haiku-4-5")
    assert price_of(reply("claude-sonnet-5")) == pricing.known_price("claude-sonnet-5")
    # a reply that names neither: the dearest rate of each kind, never less than it cost
    ceiling = price_of(reply("someone-else"))
    assert ceiling == pricing.known_price("claude-sonnet-5")


def test_a_chain_with_one_unpriced_model_is_refused() -> None:
    a, b = ScriptedModel([]), ScriptedModel([])
    a.model, b.model = "claude-sonnet-5", "my-local-model"  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="my-local-model"):
        pricing.pricer(FallbackModel([a, b]))
    both = {"claude-sonnet-5": SONNET, "my-local-model": Price(input=0, output=0)}
    assert pricing.pricer(FallbackModel([a, b]), both)(reply("my-local-model")).output == 0
