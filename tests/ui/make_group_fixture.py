"""Record fixtures/group-run from a real demo run folder (python tests/ui/make_group_fixture.py RUN):
its events and its capture files (the turns' text, output tokens and log-probs; the prompt tokens
are left out), with the run folder's path replaced by PLACEHOLDER. The group and find screens'
snapshots read it: a real run, fixed once, so that the pictures stay the same."""

import sys
from pathlib import Path

import orjson

HERE = Path(__file__).parent / "fixtures" / "group-run"
PLACEHOLDER = "/tmp/group-run"  # tests put the fixture's own path back in its place
DROPPED = ("prompt_tail", "prompt_shared", "prompt")


def record(run: Path, out: Path = HERE) -> None:
    out.mkdir(parents=True, exist_ok=True)
    events = (run / "events.jsonl").read_text().replace(str(run), PLACEHOLDER)
    (out / "events.jsonl").write_text(events)
    for path in sorted((run / "capture").rglob("*.jsonl")):
        lines = []
        for line in path.read_bytes().splitlines():
            raw = orjson.loads(line)
            lines.append(orjson.dumps({k: v for k, v in raw.items() if k not in DROPPED}))
        target = out / path.relative_to(run)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"\n".join(lines) + b"\n")


if __name__ == "__main__":
    record(Path(sys.argv[1]).resolve())
