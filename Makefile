# The two commands of the README: `make fuzz` (the main job) and `make test`.
# Both create .venv and install the project into it first (idempotent).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUDGET ?= 120

.PHONY: setup fuzz test lint clean

$(BIN)/bnfuzz: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/bnfuzz

# bnfuzz exits 1 when it finds bugs, which is what this job is for; 2 is a real error.
fuzz: setup
	$(BIN)/bnfuzz run --pass upstream --budget $(BUDGET) --out findings || [ $$? -eq 1 ]

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .hypothesis .pytest_cache .mypy_cache .ruff_cache findings
