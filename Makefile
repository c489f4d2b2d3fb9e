# hetero: `make demo` sets up .venv and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch 2.13.0: a CPU wheel on this project's machines. Elsewhere, for a CPU-only torch:
#   make test TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/hetero devices --all
	$(PY) examples/copy_across_devices.py
	$(PY) examples/kernel_everywhere.py

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) build dist *.egg-info
