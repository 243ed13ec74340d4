"""The repository's folders that the tests read."""

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
# CI and developer checkouts have the project's shared data beside the repo; a checkout elsewhere
# names it with TBCONSOLE_SHARED.
SHARED = Path(os.environ.get("TBCONSOLE_SHARED") or REPO.parent / "shared")
# Real Terminal-Bench 2 task folders (the `tb2_sample` fixture: skipped without them, failed in CI).
TB2_SAMPLE = SHARED / "tb2-sample"
# Recorded runs' events (synthetic ones and real runs' files), read by the console and state tests.
FIXTURES = TESTS / "ui" / "fixtures"
# Recorded real runs (gzipped events.jsonl) the advisory rules are calibrated against.
CORPUS = TESTS / "advisories" / "corpus"
