# Two entry points for a fresh machine: `make run` and `make test`.
# TORCH_SPEC pins the CPU build that ships on this project's machines; override it elsewhere
# (e.g. make run TORCH_SPEC='torch --index-url ...') to get your accelerator's build.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
ARGS ?=

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

.PHONY: install run test test-slow check
install: $(VENV)/.installed

# Lint, format, types and the import contracts (layers one way, no torch in records/views,
# no cycles): part of `make test`, so CI fails on any of them.
check: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

run: install
	$(VENV)/bin/torchport run $(ARGS)

test: install check
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow
