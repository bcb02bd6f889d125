# freezeview: two commands set everything up on a fresh machine.
#   make demo   build .venv, install torch (CPU) + freezeview + Graphviz, open the bundled example
#   make test   same bootstrap, then the whole test suite (fast and slow sets)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.freezeview-installed
TORCH_PIN ?= torch==2.13.0
# pytest-xdist workers: the suite is mostly torch, Textual and subprocesses (about a
# third of its CPU is in the interpreters the tests start) with waits between. On this
# 2-core machine a third worker runs while the others wait (docs/benchmarks.md has the
# figures, docs/notes/suite-speed.md the reasons). loadgroup keeps the tests that share a
# module-scoped fixture or a corpus case on one worker (tests/conftest.py marks them, and
# orders the work it hands out: --no-loadscope-reorder keeps that order), so that work is
# done once per run rather than once per worker.
WORKERS ?= 3
# Python's bytecode cache (__pycache__, ignored by git) spares every test worker and
# every freezeview process the tests start from compiling freezeview and the tests
# again: pytest rewrites the asserts of each test module it imports, about 2 s a worker.
# A machine that sets PYTHONDONTWRITEBYTECODE would pay that on every run.
unexport PYTHONDONTWRITEBYTECODE
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadgroup --no-loadscope-reorder
EXAMPLE := examples/example.pt

.PHONY: demo explain-demo test test-fast test-slow test-tools test-torch check screenshots architecture-picture bench clean graphviz

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

# The suite against another torch release, in a venv of its own (CI stays on $(TORCH_PIN)):
#   make test-torch TORCH=2.6.0            the fast set
#   make test-torch TORCH=2.6.0 SET=all    fast and slow
#   make test-torch TORCH=2.6.0 ARGS="-x tests/engine/freeze/test_pipeline.py"
# The venv ($(TORCH_VENVS)/RELEASE) is built once and reused: torch first (from PyPI that
# is the CUDA build with its nvidia-* packages, 5-7 GB a release), then freezeview from
# this checkout. docs/torch-releases.md has each release's result.
TORCH ?=
SET ?= fast
ARGS ?=
TORCH_VENVS ?= $(or $(TMPDIR),/tmp)/fv-torch
TORCH_PY := $(TORCH_VENVS)/$(TORCH)/bin/python

test-torch: graphviz $(if $(filter all,$(SET)),test-tools)
	@test -n "$(TORCH)" || { echo "usage: make test-torch TORCH=2.6.0 [SET=all] [ARGS=...]" >&2; exit 2; }
	@set -e; stamp=$(TORCH_VENVS)/$(TORCH)/.freezeview-installed; \
	if [ ! -f $$stamp ] || [ "$$(cat $$stamp)" != "$(CURDIR)" ] || [ pyproject.toml -nt $$stamp ]; then \
	  echo "Building $(TORCH_VENVS)/$(TORCH): torch $(TORCH), then freezeview from $(CURDIR)..."; \
	  test -x $(TORCH_PY) || $(PYTHON) -m venv $(TORCH_VENVS)/$(TORCH); \
	  $(TORCH_PY) -m pip install -q --upgrade pip; \
	  $(TORCH_PY) -m pip install -q torch==$(TORCH); \
	  $(TORCH_PY) -m pip install -q -e '.[dev]'; \
	  echo "$(CURDIR)" > $$stamp; \
	fi
	$(TORCH_PY) -c 'import sys, torch; print("torch", torch.__version__); sys.exit(not torch.__version__.startswith("$(TORCH)"))'
	$(TORCH_PY) -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadgroup --no-loadscope-reorder \
	  $(if $(filter all,$(SET)),,-m "not slow") $(ARGS)

# ruff (lint and format) and mypy: the facade's and the engine's types are checked, not promised.
check: $(STAMP)
	$(VENV)/bin/ruff check freezeview tests benchmarks examples scripts
	$(VENV)/bin/ruff format --check freezeview tests benchmarks examples scripts
	$(VENV)/bin/mypy freezeview

screenshots: $(STAMP) $(EXAMPLE)
	$(PY) scripts/export_screenshots.py

# docs/architecture.svg, the map's picture, drawn again from docs/architecture.dot.
architecture-picture: graphviz
	$(or $(wildcard $(PY)),$(PYTHON)) scripts/render_architecture.py

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) $(EXAMPLE) build *.egg-info
