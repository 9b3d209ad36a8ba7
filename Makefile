# `make test` and `make demo` work on a fresh machine with only Python: they build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLE := examples/market_analyst examples/market_analyst.py examples/compare_loops.py

.PHONY: test lint typecheck unit demo bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check agentloops tests $(EXAMPLE)
	$(BIN)/ruff format --check agentloops tests $(EXAMPLE)

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest --cov=agentloops --cov-report=term --cov-fail-under=90

# The Market Analyst offline (deterministic stand-in model), one request per route.
demo: $(STAMP)
	$(BIN)/python examples/market_analyst.py --offline --yes "Quick snapshot of NVDA"
	$(BIN)/python examples/market_analyst.py --offline --yes "Investment thesis and strategic risks for MSFT"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage
