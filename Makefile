# hetero: `make demo` sets up .venv and runs the main job; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch 2.13.0: a CPU wheel on this project's machines. Elsewhere, for a CPU-only torch:
#   make test TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo test bench conformance numba-cuda-suite lint-imports docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e . --group dev
	touch $@

setup: $(VENV)/.installed

# The main job: list every device, then train the digits MLP under hetero-run with an injected
# fault that kills the worker (SIGKILL, as a segfault would): hetero-run restarts it on another
# device from its last checkpoint. A second run injects a hang (the worker stops heartbeating:
# killed after 2 s, restarted elsewhere). Last, the same training in one process with an injected
# device-lost error: hetero.guard moves it to another vendor's device, and the fault-free run
# with the same seed is trained after it for comparison.
# The devices: the CPU first (where the crash and hang rules fire), then every other device present:
# oneapi:0 comes with pip (Intel's OpenCL CPU runtime); PoCL's opencl:0, GPUs and others join where
# installed. The faults are drills: their quarantines stay within each run, the user's store is untouched.
DEMO_DEVICES ?= cpu,auto
DEMO_CRASH ?= cpu:launch:nth=2000:crash
DEMO_HANG ?= cpu:launch:nth=2000:hang:60s
DEMO_FAULT ?= oneapi:0:launch:nth=300:lost
# Each run's events and checkpoints (fresh every time: an old checkpoint would resume past the fault),
# here rather than in the user's state dir, which the demo leaves as it found it.
DEMO_RUNS ?= build/demo-runs

demo: setup
	rm -rf $(DEMO_RUNS)
	$(VENV)/bin/hetero devices --all
	$(VENV)/bin/hetero-run --devices $(DEMO_DEVICES) --run-dir $(DEMO_RUNS)/crash --inject '$(DEMO_CRASH)' \
		examples/train_digits.py --checkpoint-every 20
	$(VENV)/bin/hetero-run --devices $(DEMO_DEVICES) --run-dir $(DEMO_RUNS)/hang --heartbeat-timeout 2 \
		--inject '$(DEMO_HANG)' examples/train_digits.py --checkpoint-every 20
	$(PY) examples/train_digits.py --inject '$(DEMO_FAULT)' --compare

# The suite on one worker per core (pytest-xdist), each test file whole on one worker, so that a
# file's tests share the kernels they build; TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= auto
test: setup
	$(PY) -m pytest --durations=25 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The import contracts in pyproject.toml ([tool.importlinter]: the floors, the scheduler's purity),
# checked by import-linter. It reads hetero/ as Python lays the package out: hetero/backends,
# compiler, scheduler and fault are links to the top-level folders package-dir installs there.
lint-imports: setup
	$(VENV)/bin/lint-imports

# The array API standard's own suite (../shared/peers/array-api-tests, copied to a temp dir) against
# hetero.xp on each device in turn: counts per device in benchmarks/results/array_api_conformance.json,
# known deviations in tests/array_api_xfails.txt. Then numba-cuda's own doc examples, unchanged, with
# `numba.cuda` naming hetero.compat.cuda (../shared/peers/numba-cuda): per file and device in
# benchmarks/results/numba_cuda_examples.json, files not passing yet in tests/numba_cuda_examples_expected.txt.
# Then numba-cuda's unit suite (numba/cuda/tests/cudapy of the numba-cuda 0.30.4 wheel, fetched from the
# package index into build/): per file and device in benchmarks/results/numba_cuda_suite.json, expected
# failures in tests/numba_cuda_xfails.txt (make numba-cuda-suite runs it alone). Then torch's OpInfo
# samples (the torch wheel's op_db) through hetero's torch backend: benchmarks/results/torch_opinfo.json.
# Last, NVIDIA's cuda-samples kernels (../shared/peers/cuda-samples) through the CUDA C front end on every device.
# Each is skipped, with a message, where its peer folder (or the wheel) is absent.
CONFORMANCE_DEVICES ?=
CONFORMANCE_EXAMPLES ?= 5
# CI runs make test first, which holds tests/test_cuda_samples.py: CONFORMANCE_SAMPLES=0 skips the second run.
CONFORMANCE_SAMPLES ?= 1
# The whole OpInfo database takes 5-25 minutes a device; CI runs its common operations in make test
# (tests/test_torch_opinfo.py) and passes CONFORMANCE_TORCH=0.
CONFORMANCE_TORCH ?= 1
# numba-cuda's unit suite: all 40 files (about 12 minutes a device), or CONFORMANCE_SUITE=quick for its
# 8 small files (CI: the runner and its stale-entry rule on every device it tests; the 40 are make conformance's).
CONFORMANCE_SUITE ?= full
conformance: setup
	$(PY) -m benchmarks.array_api_conformance --max-examples $(CONFORMANCE_EXAMPLES) \
		$(if $(CONFORMANCE_DEVICES),--devices $(CONFORMANCE_DEVICES))
	$(PY) -m benchmarks.numba_cuda_examples $(if $(CONFORMANCE_DEVICES),--devices $(CONFORMANCE_DEVICES))
	$(PY) -m benchmarks.numba_cuda_suite $(if $(filter quick,$(CONFORMANCE_SUITE)),--quick --no-write) \
		$(if $(CONFORMANCE_DEVICES),--devices $(CONFORMANCE_DEVICES))
	$(if $(filter 0,$(CONFORMANCE_TORCH)),@echo "torch OpInfo: skipped (CONFORMANCE_TORCH=0: make test ran tests/test_torch_opinfo.py)",\
	$(PY) -m benchmarks.torch_opinfo $(if $(CONFORMANCE_DEVICES),--devices $(CONFORMANCE_DEVICES)))
	$(if $(filter 0,$(CONFORMANCE_SAMPLES)),@echo "cuda-samples: skipped (CONFORMANCE_SAMPLES=0: make test ran tests/test_cuda_samples.py)",\
	$(PY) -m pytest -q -p no:cacheprovider -rs tests/test_cuda_samples.py)

numba-cuda-suite: setup
	$(PY) -m benchmarks.numba_cuda_suite $(if $(CONFORMANCE_DEVICES),--devices $(CONFORMANCE_DEVICES))

# The documentation site (mkdocs.yml, docs/): built into site/; --strict fails on a broken link or API page.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: setup
	$(PY) -m benchmarks.run_all

clean:
	rm -rf $(VENV) build dist site *.egg-info
