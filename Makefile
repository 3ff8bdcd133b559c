# Everything installs into .venv; a fresh machine needs only python3 (3.11+) and make.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: run test lint bench install dev clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

run: install
	$(PY) -m bot

test: dev
	$(PY) -m pytest -q

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: dev
	$(PY) -m bench all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
