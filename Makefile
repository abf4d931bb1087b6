# actorlog task runner. `make demo` and `make test` do all their own set-up on a fresh
# Debian/Ubuntu machine: OS packages via apt when missing, a .venv, and the Python packages.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests marked `slow` are long soaks, run by `make soak`, not by `make test`.
PYTEST_ARGS ?=

.PHONY: all setup os-packages venv fmt lint type test check demo soak bench bench-transport \
        bench-storage bench-replication bench-failover bench-rollup dashboards-check k8s-check clean

all: check

setup: os-packages venv

os-packages:
	@bash scripts/ensure-os-packages.sh

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (actorlog needs Python 3.11)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

fmt: venv
	$(BIN)/ruff format runtime actors ops tests
	$(BIN)/ruff check --fix runtime actors ops tests

lint: venv
	$(BIN)/ruff format --check runtime actors ops tests
	$(BIN)/ruff check runtime actors ops tests
	$(BIN)/lint-imports

type: venv
	$(BIN)/mypy

test: setup lint type
	$(BIN)/pytest -m "not slow" $(PYTEST_ARGS)

check: test

demo: setup
	$(BIN)/actorlog demo

soak: setup
	$(BIN)/pytest -m slow $(PYTEST_ARGS)

bench: bench-transport bench-storage

bench-transport: venv
	$(BIN)/python -m ops.bench.transport

bench-storage: venv
	$(BIN)/python -m ops.bench.storage

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
