# filejobs: every target bootstraps what it needs on a fresh clone.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Python 3.13: the pyenv build where there is one, else any python3.13 on PATH (resolved to a real path).
PYTHON313 := $(shell PYENV_VERSION=3.13.0 python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null || python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null)

.PHONY: install test lint typecheck unit demo clean

$(BIN)/python:
	@test -n "$(PYTHON313)" || { echo "python3.13 not found (try: pyenv install 3.13.0)" >&2; exit 1; }
	$(PYTHON313) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml layers/filejobs/requirements.txt
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(VENV)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/cfn-lint template.yaml

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

test: lint typecheck unit

demo: install
	$(BIN)/python tools/demo.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
