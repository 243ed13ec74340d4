"""Process groups: the one home of killing a child and everything it started.

A child started with ``start_new_session=True`` leads a process group of its own (its pgid is its
pid), and what it starts stays in that group unless it makes a session of its own too. Killing
the group in one go also gets a grandchild forked a moment ago, which a kill of the child alone
(or a walk of its children) misses.
"""

from __future__ import annotations

import os
import signal


def kill_group(pid: int, signum: int = signal.SIGKILL) -> bool:
    """Send ``signum`` to the process group ``pid`` leads; False when there is none left to
    signal (all gone) or it is not ours to signal (a member now runs as another user)."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True
