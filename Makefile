# The interpreter: PYTHON=/path/to/python overrides; otherwise the first of python3.13,
# python3.12, python3.11, python3 that runs and is Python >= 3.11.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
# make installs the pinned versions of requirements/ (the lock, made by `make lock`);
# pyproject.toml keeps the ranges users install from
DEMO_STAMP := $(VENV)/.installed-demo
DEV_STAMP := $(VENV)/.installed-dev
SWEEP_STAMP := $(VENV)/.installed-sweep

.PHONY: demo sweep-demo test bench lint typecheck lock test-latest clean

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "error: no Python >= 3.11 found (tried python3.13, python3.12, python3.11, python3); pass PYTHON=/path/to/python3"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# the runtime and the report's plotting library only: no development tool
$(DEMO_STAMP): $(BIN)/python requirements/demo.txt pyproject.toml
	$(BIN)/pip install --quiet -r requirements/demo.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $@

# the runtime, the report's plotting library and Dask distributed (numalign sweep)
$(SWEEP_STAMP): $(BIN)/python requirements/sweep.txt pyproject.toml
	$(BIN)/pip install --quiet -r requirements/sweep.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $@ $(DEMO_STAMP)

$(DEV_STAMP): $(BIN)/python requirements/dev.txt pyproject.toml
	$(BIN)/pip install --quiet -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $@ $(DEMO_STAMP) $(SWEEP_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/numalign demo
	$(BIN)/numalign simulate --out out/demo

# the small sweep (docs/sweeps.md): 24 cells on a LocalCluster, under 2 minutes on 2 cores
sweep-demo: $(SWEEP_STAMP)
	$(BIN)/numalign sweep examples/sweeps/small.yaml --out out/sweep-demo

test: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n auto --dist loadgroup

bench: $(DEV_STAMP)
	$(BIN)/python -m benchmarks

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# rewrite the lock from pyproject.toml's ranges (needs the package index): one resolution valid
# on every Python >= 3.11
UV_VENV := .venv-lock
lock:
	test -x $(UV_VENV)/bin/uv || { $(PYTHON) -m venv $(UV_VENV) && $(UV_VENV)/bin/pip install --quiet uv; }
	$(UV_VENV)/bin/uv pip compile pyproject.toml --extra report --universal --python-version 3.11 \
		--no-header --annotation-style line -o requirements/demo.txt
	$(UV_VENV)/bin/uv pip compile pyproject.toml --extra report --extra sweep --universal \
		--python-version 3.11 --no-header --annotation-style line -o requirements/sweep.txt
	$(UV_VENV)/bin/uv pip compile pyproject.toml --extra dev --extra kube --extra report --extra sweep \
		--universal --python-version 3.11 --no-header --annotation-style line -o requirements/dev.txt

# the suite against the newest versions pyproject.toml allows (not the lock): run by hand, outside
# CI, to see the next library change coming
LATEST := .venv-latest
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/pip install --quiet --upgrade pip
	$(LATEST)/bin/pip install --quiet --upgrade -e '.[dev,kube,report]'
	$(LATEST)/bin/pip list --format=freeze | grep -v '^numalign=' > $(LATEST)/versions.txt
	$(LATEST)/bin/pytest -n auto --dist loadgroup -p no:cacheprovider

clean:
	rm -rf $(VENV) $(LATEST) $(UV_VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
