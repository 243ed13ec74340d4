"""Regenerate the synthetic fixtures: python tests/ui/make_fixtures.py"""

from pathlib import Path

from tbconsole.ui.synthetic import synthetic_run, write_jsonl

HERE = Path(__file__).parent / "fixtures"

if __name__ == "__main__":
    write_jsonl(synthetic_run(error_at=(1, 2), pause_after=0), HERE / "finished" / "events.jsonl")
    write_jsonl(synthetic_run(error_at=(1, 2), decision=None, end=False), HERE / "awaiting" / "events.jsonl")
