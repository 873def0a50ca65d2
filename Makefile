# The two commands README promises: `make run` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FEDCTL := $(BIN)/fedctl

.PHONY: run test unit e2e lint bench deps down clean proto

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

deps: $(VENV)/.installed
	scripts/system-deps.sh
	$(FEDCTL) local install

## The main job on a local default fleet (hub + 3 members): propagate examples/propagation.
run: deps
	scripts/run-local.sh

## The whole test suite: lint, types, unit and e2e tests.
test: deps lint
	$(BIN)/pytest

unit: $(VENV)/.installed
	$(BIN)/pytest -m "not e2e"

e2e: deps
	$(BIN)/pytest -m e2e

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

down: $(VENV)/.installed
	$(FEDCTL) local down

clean: down
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

## Regenerate the gRPC protocols' checked-in code (grpcio-tools and mypy-protobuf pinned in
## pyproject.toml; tests/unit/work/test_proto.py fails when the files and a .proto
## differ).
proto: $(VENV)/.installed
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grpc_tools.protoc -I. --python_out=. \
		--mypy_out=. federation/work/proto/work.proto federation/reloader/proto/reconfigure.proto
