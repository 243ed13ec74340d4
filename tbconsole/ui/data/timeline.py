"""One run's step timelines (``w``), read from its ``events.jsonl`` and the cookbook's
``timing_spans.jsonl`` (``tbconsole.state.timeline``) for the timeline screen, which never opens them
itself.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tbconsole.record.runfolder import RunFolder
from tbconsole.state.timeline import StepReader, StepTimeline


def timeline_files(followed: str | Path | None, log_path: str | Path | None) -> tuple[Path, Path] | None:
    """The events file and the timing spans of the run the app shows: those of the events file
    (or run folder) it replays or follows, else of the run's own ``log_path``. None before the
    app knows of either."""
    if followed is None and log_path is None:
        return None
    if followed is not None and Path(followed).suffix == ".jsonl":
        events = Path(followed)
        folder = RunFolder(events.parent)
    else:
        root = followed or log_path
        assert root is not None  # not both None: returned above
        folder = RunFolder(root)
        events = folder.events
    return events, folder.timing_spans


class StepTimelines:
    """The steps of one run and the timeline of one of them, read on as the files grow. Where the
    steps begin is kept between opens (``StepReader.for_file``): opening the screen again reads
    only what the file gained since. Read from a worker thread, by one at a time."""

    def __init__(self, events: Path, spans: Path | None = None):
        self._reader = StepReader.for_file(events, spans)
        self._lock = threading.Lock()  # the reader is used by one worker at a time

    def read(self, step: int | None, now: float | None) -> tuple[int | None, StepTimeline | None, list[int]]:
        """Read what the files gained; then ``step`` (None: the last one so far), its timeline
        (``now`` closes what is still going; None: the last event read, as in a replay) and every
        step so far."""
        with self._lock:
            while self._reader.refresh():
                pass
            if step is None and self._reader.steps:
                step = self._reader.steps[-1]
            if step is not None:
                self._reader.select(step)
            return step, self._reader.timeline(now), list(self._reader.steps)
