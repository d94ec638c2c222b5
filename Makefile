# Two commands: `make demo` runs the main job, `make test` runs the tests.
# Both install what they need on a fresh Debian machine first (apt packages, then a venv).

PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Everything the two commands need beyond git and make: Python with venv (ensurepip) and its headers,
# a C/C++ compiler (pyvkfft builds from source), the Vulkan loader, lavapipe and the validation
# layer, the shader tools, and PoCL with the OpenCL headers for the FFTs.
APT_PACKAGES := python3 python3-venv python3-dev g++ \
                libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc spirv-tools \
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

# Installs only the packages dpkg does not list as installed, so a second run asks apt nothing.
apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	missing=$$(echo $$missing); \
	if [ -n "$$missing" ]; then \
	  if [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null; then \
	    echo "make: these Debian packages are missing and sudo is not installed: $$missing" >&2; \
	    echo "make: install them as root (apt-get install $$missing), or run make as root" >&2; exit 1; \
	  fi; \
	  echo "installing apt packages$(if $(SUDO), with $(SUDO)): $$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.installed

# The stamp is written last, only when every step passed: a failed run leaves no stamp and the next
# run redoes the steps. A venv without a working pip (one whose creation failed half way, e.g. before
# python3-venv was installed) is removed and made again.
$(VENV)/.installed: pyproject.toml | apt
	rm -f $@
	$(BIN)/python -m pip --version >/dev/null 2>&1 || { rm -rf $(VENV); $(PY) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }; }
	$(BIN)/python -m pip install -q --upgrade pip
	VKFFT_BACKEND=opencl $(BIN)/python -m pip install -q -e '.[test]'  # pyvkfft builds its OpenCL back end only
	touch $@

lint: venv
	$(BIN)/ruff check .

shaders:
	$(BIN)/python shaders/build.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
