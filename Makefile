# The two commands a new machine needs. Both set everything up themselves (scripts/bootstrap.sh).
#   make demo   — run the main job: the recipe on the embedded default, in the console
#   make test   — run the test suite
PY := .venv/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: setup demo test
setup:
	@scripts/bootstrap.sh

demo: setup
	$(PY) -m tbconsole demo $(DEMO_ARGS)

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
