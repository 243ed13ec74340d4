"""Tracebacks of failures the run reports as one message: they go to ``<log_path>/logs.log``
(beside the cookbook's own log lines), never to the terminal."""

from __future__ import annotations

import traceback
from pathlib import Path

from tbconsole.common.formatting import format_timestamp
from tbconsole.record.runfolder import RunFolder


def log_traceback(log_path: Path, exc: BaseException, what: str = "the run failed") -> Path:
    """Append ``exc``'s traceback to the run's log file and return its path (best effort: a
    full disk must not turn one message into a second failure)."""
    log_file = RunFolder(log_path).log_file
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "a", encoding="utf-8") as handle:
            handle.write(f"{format_timestamp(seconds=True)} ERROR {what}\n")
            handle.write("".join(traceback.format_exception(exc)))
    except OSError:
        pass
    return log_file
