"""Regenerate the synthetic fixtures: python tests/ui/make_fixtures.py

The fixtures hold events only. A test that opens transcripts records the same run with its
capture files (``record_finished``) in a folder of its own."""

from pathlib import Path

from tbconsole.synthetic.run import record_run, synthetic_run, write_jsonl

HERE = Path(__file__).parent / "fixtures"
FINISHED = {"error_at": (1, 2), "pause_after": 0}
AWAITING = {"error_at": (1, 2), "decision": None, "end": False}


def record_finished(log_path: Path):
    """The finished fixture's run, recorded in ``log_path`` with a capture file per trial."""
    return record_run(log_path, **FINISHED)


if __name__ == "__main__":
    write_jsonl(synthetic_run(**FINISHED), HERE / "finished" / "events.jsonl")
    write_jsonl(synthetic_run(**AWAITING), HERE / "awaiting" / "events.jsonl")
