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
	$(PY) -m pip install -q -e ".[test,docs]"
	touch $@

.PHONY: install run test test-slow check docs test-needs
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

# The documentation site (docs/, mkdocs.yml) builds with every warning an error: a broken link
# or a page that fails to render fails `make test`.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site

# One line naming any system package the tests need and the command that installs it.
test-needs:
	@bash scripts/test_needs.sh $(PY)

# --durations: the slowest tests and fixtures in every run, so the suite's cost stays visible.
# -n 2: two pytest-xdist workers, a test module per worker at a time (tests/conftest.py).
test: test-needs install check docs
	$(PY) -m pytest -q --durations=40 -n 2

test-slow: install
	$(PY) -m pytest -q -m slow
