# The two commands a new machine needs. Both set everything up themselves (scripts/bootstrap.sh:
# .venv, then the agent CLIs in .agents/ through scripts/agents.sh).
#   make demo   — run the main job: the recipe on the embedded default, in the console
#   make test   — the checks of `make lint`, then the test suite
#   make lint   — import contracts (lint-imports), ruff lint and format check, mypy
#   make agents — (again) install the pinned Claude Code and Codex CLI into .agents/
PY := .venv/bin/python
BIN := .venv/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup agents demo lint test
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

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)
