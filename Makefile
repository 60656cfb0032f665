# Airlock developer tasks. `make` alone lists them.
#
# Tests and the demo run under scripts/devservices.py, which starts an embedded PostgreSQL and a
# private Redis unless DATABASE_URL / REDIS_URL are already set.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Stamp: (re)install only when a requirements file is newer than the last install.
INSTALLED := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install test lint format typecheck demo bench docs all

help: ## Show this list of targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-10s %s\n", $$1, $$2 }' \
		$(MAKEFILE_LIST)

install: $(INSTALLED) ## Create .venv and install requirements (only when they changed)

$(INSTALLED): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt -r requirements-dev.txt
	touch $@

# scripts/browser.py finds (or installs) a Chromium for the browser tests first, and stops with
# one line saying what to install when it can do neither.
test: install ## Run the tests (PYTEST_ARGS="-k foo -x" to pass options)
	$(BIN)/python scripts/browser.py run -- \
		$(BIN)/python scripts/devservices.py run -- $(BIN)/pytest $(PYTEST_ARGS)

lint: install ## Check style with ruff (lint + formatting) and layering with import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: install ## Reformat and autofix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# --explicit-package-bases: module names follow the directory layout even where there is no
# __init__.py; otherwise mypy calls scripts/demo.py "demo", which clashes with the demo/ app.
typecheck: install ## Type-check with mypy
	$(BIN)/mypy --explicit-package-bases .

demo: install ## Run the demo at http://127.0.0.1:8000/ (PORT=..., AGENT_RUNNER=durable)
	$(BIN)/python scripts/devservices.py run -- $(BIN)/python scripts/demo.py

bench: install ## Run the approval-cycle benchmark and its SQL floors (bench/README.md)
	$(BIN)/python scripts/devservices.py run -- $(BIN)/python bench/approval_cycle.py
	$(BIN)/python scripts/devservices.py run -- $(BIN)/python bench/sql_floor.py
	$(BIN)/python scripts/devservices.py run -- $(BIN)/python bench/sql_floor.py --durable

# The diagrams' script comes from mermaid's npm package, unpacked into the build (no CDN when a
# page is viewed): npm fetches the package once per version.
MERMAID_VERSION := 11.12.1
MERMAID := docs/_build/vendor/mermaid/mermaid.esm.min.mjs

$(MERMAID):
	@command -v npm >/dev/null || { echo "make docs needs npm: apt-get install npm"; exit 1; }
	rm -rf docs/_build/vendor && mkdir -p docs/_build/vendor
	cd docs/_build/vendor && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null \
		&& tar xzf mermaid-$(MERMAID_VERSION).tgz package/dist/mermaid.esm.min.mjs \
			package/dist/chunks/mermaid.esm.min \
		&& mv package/dist mermaid && rm -rf package mermaid-$(MERMAID_VERSION).tgz

docs: install $(MERMAID) ## Build the manual into docs/_build/html (warnings are errors)
	$(BIN)/sphinx-build -W --keep-going -n -q -b html docs docs/_build/html

all: lint typecheck test ## lint + typecheck + test
