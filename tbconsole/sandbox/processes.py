"""Host processes as /proc shows them: liveness that survives pid reuse, descendants, kills."""

from __future__ import annotations

import os
import signal
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


def descendants(pid: int) -> list[int]:
    """All live descendants of pid (children first discovered, deepest last)."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    frontier.append(child)
    return found


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL pid and everything below it, including children that left its process group."""
    for target in [pid, *descendants(pid)]:
        kill(target)
