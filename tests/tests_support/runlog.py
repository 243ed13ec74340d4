"""A run folder's events, as a test polls them while the run goes on."""

from pathlib import Path

from tbconsole.record.events import read_events
from tbconsole.record.runfolder import RunFolder


def run_events(log: Path) -> list:
    """The events of the run in ``log`` so far ([] before its first)."""
    path = RunFolder(log).events
    return list(read_events(path)) if path.exists() else []
