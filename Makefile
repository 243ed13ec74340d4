# The two commands a new machine needs. Both set everything up themselves (scripts/bootstrap.sh:
# .venv, then the agent CLIs in .agents/ through scripts/agents.sh).
#   make demo   — run the main job: the recipe on the embedded default, in the console
#   make test   — run the test suite
#   make agents — (again) install the pinned Claude Code and Codex CLI into .agents/
PY := .venv/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup agents demo test
setup:
	@scripts/bootstrap.sh

agents:
	@scripts/agents.sh

demo: setup
	$(PY) -m tbconsole demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
