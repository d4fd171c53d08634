# Everything runs through uv and the committed uv.lock. uv itself is bootstrapped from PyPI
# into .tools/ when the machine does not have it.
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
RUN := $(UV) run --frozen

.PHONY: install test lint test-packages demo dev bench clean soak docs

.tools/bin/uv:
	python3 -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

# Bytecode is compiled once, here. Exported to every `uv run`, the same setting would re-check
# all of the environment's files on each launch (about half a second).
.venv/.synced: uv.lock pyproject.toml | $(UV)
	UV_COMPILE_BYTECODE=1 $(UV) sync --frozen
	touch $@

# The project's own modules are installed as source (editable): compiled here too, so that
# every launch reads their bytecode even where PYTHONDONTWRITEBYTECODE is set (as in many
# container images), instead of compiling each module again. Unchanged files are skipped.
PACKAGES := ductwork assets pipelines serve warehouse_sql sandbox bench

install: .venv/.synced ## Install the locked dependencies into .venv
	$(RUN) python -m compileall -q $(PACKAGES)

lint: install ## ruff, and the Dagster definitions load
	$(RUN) ruff check .
	$(RUN) ruff format --check .

test-packages: ## Debian's chromium, postgresql and redis-server, which the tests drive (installed as root)
	.ci/provision-test-packages

test: lint test-packages ## The whole test suite
	$(RUN) pytest

soak: install ## More trials of the fault, crash and bad-input tests (minutes, not seconds)
	DUCTWORK_SOAK=1 $(RUN) pytest tests/resilience/ \
		tests/test_read_api_bad_input.py

demo: install ## Sandbox upstream -> sync -> DuckDB -> read API, and the Dagster UI
	$(RUN) ductwork demo

bench: install ## Benchmarks at medium and large scale against a floor, a peer and a ceiling (bench/RESULTS.md)
	$(RUN) --group bench python -m bench.suite $(BENCH_ARGS)

docs: install ## The documentation site from docs/ into site/ (strict: a broken link or an unlisted page fails)
	NO_MKDOCS_2_WARNING=1 $(RUN) mkdocs build --strict

dev: install ## The Dagster UI on DUCTWORK_HOME's instance
	$(RUN) ductwork dev

clean:
	rm -rf .venv .tools .ductwork .pytest_cache .ruff_cache site
