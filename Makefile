# The two commands a new machine needs. Both set everything up themselves (scripts/bootstrap.sh).
#   make demo   — run the main job
#   make test   — run the test suite
PY := .venv/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup demo test
setup:
	@scripts/bootstrap.sh

demo: setup
	$(PY) -m tbconsole trial tbconsole/tasks/recover-lost-commit --trials-dir trials

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
