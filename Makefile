# The two commands README promises: `make run` and `make test`. Both install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FEDCTL := $(BIN)/fedctl

.PHONY: run test unit e2e lint bench deps down clean proto lock check-latest image manifests coverage floors

# Installs are reproducible: every package (runtime and dev) comes from requirements.lock,
# exact versions with their hashes, and the project itself is installed without resolving
# anything (its build backend, setuptools, is in the lock too). `make lock` refreshes the
# lock on purpose; `make check-latest` tries the newest versions without touching it.
$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $@

UV_VERSION := 0.13.9
## Refresh requirements.lock to the newest versions pyproject.toml allows (then `make test`).
lock:
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q uv==$(UV_VERSION)
	.venv-lock/bin/uv pip compile pyproject.toml --extra dev --generate-hashes --universal \
		--python-version 3.11 --no-header --upgrade -q -o requirements.lock

## The scheduled check (.github/workflows/latest.yml): lint and unit tests on the newest
## versions of every dependency, unlocked, in a venv of its own (.venv-latest).
check-latest:
	rm -rf .venv-latest
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/pip install -q --upgrade pip
	.venv-latest/bin/pip install -q --upgrade -e '.[dev]'
	.venv-latest/bin/pip list --format=freeze | grep -v '^federation' > .venv-latest/versions.txt
	diff <(grep -E '^[a-z]' requirements.lock | sed 's/ .*//') \
		<(tr 'A-Z_' 'a-z-' < .venv-latest/versions.txt | sort) || true
	.venv-latest/bin/ruff check .
	.venv-latest/bin/mypy
	.venv-latest/bin/lint-imports
	.venv-latest/bin/pytest -m "not e2e" -q

## config/: the kustomize bases and overlays, generated from federation/deploy (a unit test
## fails when the committed tree differs from what this writes).
manifests: $(VENV)/.installed
	$(BIN)/python -m federation.deploy config

deps: $(VENV)/.installed
	scripts/system-deps.sh
	$(FEDCTL) local install
	$(FEDCTL) local install-helm

## The main job on a local default fleet (hub + 3 members): propagate examples/propagation.
run: deps
	scripts/run-local.sh

## The whole test suite: lint, types, the unit tests on both cores (measuring the controllers'
## coverage as they run), the e2e tests one at a time on a real local fleet (the slowest
## printed), then the coverage floors. The e2e run is given its directories (E2E_PATHS):
## collecting the ~3,000 unit tests only to deselect them took it over 20 s.
E2E_PATHS := tests/e2e tests/image
test: deps lint
	$(BIN)/pytest -m "not e2e" -n 2 --cov=federation.controllers --cov-report=
	$(BIN)/pytest -m e2e --durations=25 $(E2E_PATHS)
	$(MAKE) floors

## Unit coverage floors of the controller kit (95%) and the applications controller (90%).
floors: $(VENV)/.installed
	$(BIN)/coverage report --include='federation/controllers/kit/*' --fail-under=95
	$(BIN)/coverage report --include='federation/controllers/applications/*' --fail-under=90

## The same floors from the controllers', the Application model's and the scoped Secret
## informers' own unit tests alone (stricter: no other test's coverage counts).
coverage: $(VENV)/.installed
	$(BIN)/pytest -q -m "not e2e" -p no:randomly --cov=federation.controllers --cov-report= \
		tests/unit/controllers tests/unit/applications tests/unit/contexts/test_scoped_secrets.py
	$(MAKE) floors

unit: $(VENV)/.installed
	$(BIN)/pytest -m "not e2e"

e2e: deps
	$(BIN)/pytest -m e2e $(E2E_PATHS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## The container image from the Containerfile, here with no Docker engine (buildah, and bases
## made from Debian's packages; root): build/image/fedctl-<version>.oci.tar. Elsewhere:
## `docker build -f Containerfile .`. tests/image build it too and run it (docs/install.md).
image:
	scripts/system-deps.sh
	scripts/build-image.sh

down: $(VENV)/.installed
	$(FEDCTL) local down

clean: down
	rm -rf $(VENV) .venv-lock .venv-latest .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

## Regenerate the gRPC protocols' checked-in code (grpcio-tools and mypy-protobuf pinned in
## pyproject.toml; tests/unit/work/test_proto.py fails when the files and a .proto
## differ).
proto: $(VENV)/.installed
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grpc_tools.protoc -I. --python_out=. \
		--mypy_out=. federation/work/proto/work.proto federation/reloader/proto/reconfigure.proto \
		federation/reloader/proto/config_manager.proto
