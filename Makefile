# freezeview: two commands set everything up on a fresh machine.
#   make demo   build .venv, install torch (CPU) + freezeview + Graphviz, open the bundled example
#   make test   same bootstrap, then the whole test suite (fast and slow sets)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.freezeview-installed
TORCH_PIN ?= torch==2.13.0
# pytest-xdist workers: the suite is mostly torch and subprocess waits, and 2 workers
# on this 2-core machine cut its wall time by about a third. loadgroup keeps the tests
# that share a module-scoped fixture or a corpus case on one worker (tests/conftest.py
# marks them), so that work is done once per run rather than once per worker.
WORKERS ?= 2
# Python's bytecode cache (__pycache__, ignored by git) spares every test worker and
# every freezeview process the tests start from compiling freezeview and the tests
# again: pytest rewrites the asserts of each test module it imports, about 2 s a worker.
# A machine that sets PYTHONDONTWRITEBYTECODE would pay that on every run.
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadgroup
EXAMPLE := examples/example.pt

.PHONY: demo explain-demo test test-fast test-slow test-tools check screenshots bench clean graphviz

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '.[dev]'
	$(MAKE) --no-print-directory graphviz
	touch $(STAMP)

graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "Installing Graphviz (dot) from Debian's packages..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq graphviz >/dev/null; }

# The slow tests also drive the app in tmux and render index.html in headless Chromium.
test-tools:
	@missing=""; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing$$missing from Debian's packages (used by the slow tests)..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; } \
	    || echo "Could not install$$missing: the tests that need them will be skipped."; \
	fi

$(EXAMPLE): examples/build_example.py $(STAMP)
	$(PY) examples/build_example.py $(EXAMPLE)

demo: $(STAMP) $(EXAMPLE)
	$(VENV)/bin/freezeview $(EXAMPLE) --preserve temperature

explain-demo: $(STAMP) $(EXAMPLE)
	$(VENV)/bin/freezeview explain $(EXAMPLE) --preserve temperature

test: $(STAMP) $(EXAMPLE) test-tools
	$(PYTEST)

test-fast: $(STAMP) $(EXAMPLE)
	$(PYTEST) -m "not slow"

test-slow: $(STAMP) $(EXAMPLE) test-tools
	$(PYTEST) -m slow

# ruff (lint and format) and mypy: the facade's and the engine's types are checked, not promised.
check: $(STAMP)
	$(VENV)/bin/ruff check freezeview tests benchmarks examples scripts
	$(VENV)/bin/ruff format --check freezeview tests benchmarks examples scripts
	$(VENV)/bin/mypy freezeview

screenshots: $(STAMP) $(EXAMPLE)
	$(PY) scripts/export_screenshots.py

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(EXAMPLE) build *.egg-info
