# The two commands a new machine needs. Both set everything up themselves (scripts/bootstrap.sh:
# .venv, then the agent CLIs in .agents/ through scripts/agents.sh).
#   make demo   — run the main job: the recipe on the embedded default, in the console
#   make test   — the checks of `make lint`, then the test suite
#   make test-fast — the unit tests only (no process, engine, sandbox or console app started): under a minute
#   make lint   — import contracts (lint-imports), ruff lint and format check, mypy, the docs built strict
#   make docs   — the docs site (mkdocs.yml, docs/) built strict into site/; README.md's links checked
#   make agents — (again) install the pinned Claude Code and Codex CLI into .agents/
PY := .venv/bin/python
BIN := .venv/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
# mypy's incremental cache outside the checkout, as pip keeps its wheels: a fresh clone at the same
# place checks in about a second instead of half a minute (mypy compares each file's hash, so a
# changed file is checked again whatever its cache says).
export MYPY_CACHE_DIR ?= $(HOME)/.cache/tbconsole/mypy

.PHONY: setup agents demo lint docs test
setup:
	@scripts/bootstrap.sh

agents:
	@scripts/agents.sh

demo: setup
	$(PY) -m tbconsole demo $(DEMO_ARGS)

# The contracts and tool settings live in pyproject.toml.
lint: setup
	$(BIN)/lint-imports --no-logo
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@scripts/docs.sh

# The site builds offline (no web fonts, no plugin that fetches); scripts/docs.sh runs
# $(BIN)/mkdocs build --strict after checking README.md's relative links.
docs: setup
	@scripts/docs.sh

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The unit tests alone, in well under a minute: none starts a process, the engine, a sandbox, the
# demo recording or the console app (tests/conftest.py fails one not marked e2e that does).
.PHONY: test-fast
test-fast: setup
	$(PY) -m pytest -m "not e2e" -q
