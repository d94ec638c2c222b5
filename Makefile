# Two commands: `make demo` runs the main job, `make test` runs the tests.
# Both install what they need on a fresh Debian machine first (apt packages, then a venv).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PACKAGES := libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc spirv-tools \
                pocl-opencl-icd ocl-icd-opencl-dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Tests run with the Khronos validation layer on, synchronization validation included (missing
# barriers); tests/conftest.py turns any message into a failure.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
TEST_ENV := LAZYFUEL_VALIDATION=sync XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp}

.PHONY: test demo deps apt venv lint shaders clean

test: deps
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/lazyfuel audit | tail -n 2
	$(TEST_ENV) $(BIN)/python -m pytest -q

demo: deps
	XDG_RUNTIME_DIR=$${XDG_RUNTIME_DIR:-/tmp} $(BIN)/lazyfuel run graphs/quickstart.yaml

deps: apt venv

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages: $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	VKFFT_BACKEND=opencl $(BIN)/pip install -q -e '.[test]'  # pyvkfft builds its OpenCL back end only
	touch $@

lint: venv
	$(BIN)/ruff check .

shaders:
	$(BIN)/python shaders/build.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
