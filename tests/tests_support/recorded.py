"""Recorded runs: the advisory corpus, the synthetic fixtures, and the settings of the session's
demo recording (conftest's ``demo_run``)."""

import gzip
import json
from pathlib import Path

from tbconsole.record import events as ev
from tbconsole.record.events import decode
from tbconsole.synthetic.run import record_run

from tests_support.paths import CORPUS, FIXTURES

# Steps of the demo run recorded once per session (conftest's ``demo_run``): the multi-turn demo,
# long enough that some step holds a group with mixed rewards for the learning test to measure
# (fewer left some runs without one).
DEMO_RUN_STEPS = 4
# Its held-out evaluations score each held-out variant once (the demo's default is twice): half
# the trials, the same paths (the held-out evaluation's trials, captures and events).
DEMO_RUN_EVAL_GROUP_SIZE = 1

# A real 2-step demo run's events (recorded; 2 groups × 4 trials per step).
DEMO_RUN_EVENTS = FIXTURES / "demo-run" / "events.jsonl"

# The synthetic fixtures' runs (tests/ui/make_fixtures.py writes their events.jsonl).
FINISHED = {"error_at": (1, 2), "pause_after": 0}
AWAITING = {"error_at": (1, 2), "decision": None, "end": False}


def corpus_events(name: str) -> list[ev.Event]:
    """A run of the advisory corpus, its events (without the facts the corpus keeps beside them)."""
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f:
        return [e for line in f if "fact" not in json.loads(line) and (e := decode(line)) is not None]


def recorded_runs() -> list[Path]:
    """Every recorded events.jsonl under the fixtures (synthetic ones and real runs' files)."""
    return sorted(FIXTURES.glob("*/events.jsonl"))


def record_finished(log_path: Path):
    """The finished fixture's run, recorded in ``log_path`` with a capture file per trial."""
    return record_run(log_path, **FINISHED)
