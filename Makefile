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

.PHONY: install run test test-slow
install: $(VENV)/.installed

run: install
	$(VENV)/bin/torchport run $(ARGS)

test: install
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow
