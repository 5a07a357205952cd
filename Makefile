# Quick start: `make demo`, `make test`. Everything installs into ./.venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch/torchvision pinned to releases that install from this machine kind's local wheel cache and
# import together (see docs/development.md); timm imports torchvision.
TORCH := torch==2.14.1 torchvision==0.29.1

 .PHONY: demo check test fuzz-wide test-xla bench install clean catalog

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@echo "creating $(VENV) and upgrading pip"
	$(BIN)/python -m pip install --progress-bar off --upgrade pip

# Both distributions, editable: the product (.) and the local sandbox AWS (./sandbox, trainctl-sandbox),
# which the tests, the demo and `trainctl sandbox` need; the product wheel holds none of the sandbox.
$(VENV)/.installed: pyproject.toml sandbox/pyproject.toml | $(BIN)/python
	@echo "installing trainctl, the sandbox and the test tools into $(VENV): torch is the largest part (about"
	@echo "four minutes and 6 GB on a fresh machine, most of it CUDA libraries; README: the lighter install"
	@echo "without torch); pip names each package as it goes"
	$(BIN)/pip install --progress-bar off -e '.[test]' -e ./sandbox $(TORCH) 'timm>=1.0'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python scripts/demo.py

# The inner loop: the pure and CLI tiers and the project's shape, no training (about 2 minutes on 2 CPUs).
check: install
	$(BIN)/python -m pytest -q -n 2 tests/unit tests/cli tests/project

test: install
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup

# Opt-in: the hostile-input tests with a random, 20 times wider search (`make test` runs them derandomized,
# the same examples every time, so it is green or red for the code and not for the draw).
fuzz-wide: install
	TRAINCTL_FUZZ=wide $(BIN)/python -m pytest -q tests/cli/test_fuzz_cli.py tests/cli/test_fuzz_spec.py

bench: install
	$(BIN)/python scripts/bench_cli.py
	$(BIN)/python -m trainctl_sandbox.server.bench_start --runs 5

# Opt-in: the Neuron entrypoint through torch_xla on the CPU, in its own environment (.xla-venv/,
# torch 2.9.0 + torch-xla 2.9.0, a multi-GB download). Not part of `make test`.
test-xla:
	bash scripts/test_xla.sh

catalog:
	$(PYTHON) scripts/build_catalog.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info sandbox/build sandbox/*.egg-info
