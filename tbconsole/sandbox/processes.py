"""Host processes as /proc shows them: liveness that survives pid reuse. (Killing a process and
all it started: ``tbconsole.common.procgroup``.)"""

from __future__ import annotations

from pathlib import Path


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat, the start time: it tells a recycled pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def process_alive(pid: int, started: str | None = None) -> bool:
    """Whether pid runs (and, given its start time, is still that same process)."""
    current = start_time(pid)
    return current is not None and (started is None or current == started)
