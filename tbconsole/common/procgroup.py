"""Killing a child and everything it started: the one home of it.

What a child started is found two ways, and each finds some the other misses:

- its process group: a child started with ``start_new_session=True`` leads a group of its own
  (its pgid is its pid), and what it starts stays in that group unless it makes a session of its
  own too. Killing the group in one go also gets a grandchild forked a moment ago, which a kill
  of the child alone (or a walk of its children) misses;
- its descendants, as /proc shows them: they include those that left the group (the local
  sandbox's ``unshare``/``nsenter`` chain), which a group kill misses.

``kill_tree`` does both, for a child whose every process must go (a sandbox's command or holder).
``kill_group`` alone is for a child whose processes all stay in its group (the console on a
pseudo-terminal, a notifier's command, a detached runner); ``kill_process`` signals one process
(a sandbox's PID 1, whose namespace the kernel empties with it; the processes of a cgroup).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def kill_process(pid: int, signum: int = signal.SIGKILL) -> bool:
    """Send ``signum`` to ``pid`` alone; False when it is gone or not ours to signal."""
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(pid: int, signum: int = signal.SIGKILL) -> bool:
    """Send ``signum`` to the process group ``pid`` leads; False when there is none left to
    signal (all gone) or it is not ours to signal (a member now runs as another user)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


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


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` (a child that leads its own session), its process group and every
    descendant, those that left the group included. The descendants are listed before the kill:
    once a process dies, its orphans are no longer found below it."""
    tree = [pid, *descendants(pid)]
    kill_group(pid)
    for target in tree:
        kill_process(target)
