"""Regenerate the synthetic fixtures: python tests/ui/make_fixtures.py

The fixtures hold events only. A test that opens transcripts records the same run with its
capture files (``tests_support.recorded.record_finished``) in a folder of its own."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for tests_support

from tbconsole.synthetic.run import synthetic_run, write_jsonl  # noqa: E402

from tests_support.paths import FIXTURES  # noqa: E402
from tests_support.recorded import AWAITING, FINISHED  # noqa: E402

# The off-policy mode's run: max_steps_off_policy 2, lowered to 1 from update 5; groups trained
# 0 to 2 updates stale, two dropped as stale and one left unfinished at the end.
OFFPOLICY = {"steps": 6, "off_policy": 2, "lower_at": (5, 1), "seed": 0}

if __name__ == "__main__":
    write_jsonl(synthetic_run(**FINISHED), FIXTURES / "finished" / "events.jsonl")
    write_jsonl(synthetic_run(**AWAITING), FIXTURES / "awaiting" / "events.jsonl")
    write_jsonl(synthetic_run(**OFFPOLICY), FIXTURES / "offpolicy" / "events.jsonl")
