# The two commands of the README: `make fuzz` (the main job) and `make test`; `make check` is
# the quick tier of `make test` for the edit-test loop. All create .venv and install the
# project into it first (idempotent).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUDGET ?= 120
# pytest-xdist workers: one per core of these 2-core machines. Tests that share the corpus's
# replays carry xdist_group("corpus"); --dist loadgroup keeps them on one worker.
JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(JOBS) --dist loadgroup
# The TVM release to install: 0.27 (the pinned default), 0.26 or 0.25. constraints/tvm-$(TVM).txt
# pins it and the apache-tvm-ffi it needs; changing TVM reinstalls into the same .venv.
TVM ?= 0.27
CONSTRAINTS := constraints/tvm-$(TVM).txt
STAMP := $(VENV)/.installed-tvm-$(TVM)

ifeq ($(wildcard $(CONSTRAINTS)),)
$(error TVM=$(TVM) is not supported: choose one of $(patsubst constraints/tvm-%.txt,%,$(wildcard constraints/tvm-*.txt)))
endif

.PHONY: setup fuzz check test test-all lint clean

# pip's output goes to $(VENV)/setup.log; on a failure its last lines are shown.
$(STAMP): pyproject.toml $(CONSTRAINTS)
	@echo "setting up $(VENV) with TVM $(TVM) (pip's output: $(VENV)/setup.log)"
	@$(PYTHON) -m venv $(VENV)
	@{ $(BIN)/pip install --upgrade pip && $(BIN)/pip install -e '.[test]' -c $(CONSTRAINTS); } \
		> $(VENV)/setup.log 2>&1 || { tail -n 30 $(VENV)/setup.log; echo "setup failed: see $(VENV)/setup.log"; exit 1; }
	@rm -f $(VENV)/.installed-tvm-*
	@touch $@

setup: $(STAMP)

# bnfuzz exits 1 when it finds bugs, which is what this job is for; 2 is a real error.
fuzz: setup
	@echo "$(BIN)/bnfuzz run --pass upstream --budget $(BUDGET) --out findings"
	@$(BIN)/bnfuzz run --pass upstream --budget $(BUDGET) --out findings || [ $$? -eq 1 ]

# fuzz/backends/tvm/fold_batchnorm.py is proposed to TVM as its pass: it is kept in TVM's style.
TVM_RUFF := --config fuzz/backends/tvm/upstream/tvm-ruff.toml fuzz/backends/tvm/fold_batchnorm.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ruff check $(TVM_RUFF)
	$(BIN)/ruff format --check $(TVM_RUFF)
	$(BIN)/mypy

# The quick tier: every test not marked slow (no campaigns, subprocesses or many-example builds).
check: lint
	$(PYTEST) -m "not slow"

# Everything but the tests marked nightly (minutes of CPU each); the 15 slowest are listed
# at the end. .ci/run calls this; test-all (the nightly workflow) adds the nightly ones.
test: lint
	$(PYTEST) -m "not nightly" --durations=15

test-all: lint
	$(PYTEST) --durations=15

clean:
	rm -rf $(VENV) .venv-* tvm-versions .hypothesis .pytest_cache .mypy_cache .ruff_cache findings
