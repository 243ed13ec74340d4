"""The repository's folders that the tests read."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
# CI and developer checkouts have the project's shared data beside the repo.
SHARED = REPO.parent / "shared"
# Recorded runs' events (synthetic ones and real runs' files), read by the console and state tests.
FIXTURES = TESTS / "ui" / "fixtures"
# Recorded real runs (gzipped events.jsonl) the advisory rules are calibrated against.
CORPUS = TESTS / "advisories" / "corpus"
