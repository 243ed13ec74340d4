"""Who owns a sandbox folder, and the removal of those whose runner is gone.

Each sandbox folder holds ``owner.json``: the runner's pid and the holder's, each with its start
time (a recycled pid is not taken for the owner). A runner killed outright leaves its folder and
cgroups behind; the next start of any sandbox removes them (``clean_leftovers``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from tbconsole.common import atomic
from tbconsole.common.procgroup import kill_tree
from tbconsole.sandbox import limits
from tbconsole.sandbox.processes import process_alive, start_time
from tbconsole.sandbox.spec import DEFAULT_ROOT

OWNER_FILE = "owner.json"
# A folder with no owner.json yet is being created by another start (or its runner crashed
# in that instant): only remove it once it is this old.
OWNERLESS_GRACE_SEC = 60


def write_owner(folder: Path, name: str, holder_pid: int | None) -> None:
    """Record this runner (and the holder, once it exists) as the owner of ``folder``."""
    owner = {
        "runner_pid": os.getpid(),
        "runner_start": start_time(os.getpid()),
        "holder_pid": holder_pid,
        "holder_start": start_time(holder_pid) if holder_pid else None,
        "name": name,
    }
    atomic.write_json(folder / OWNER_FILE, owner, indent=None)


def clean_leftovers(root: Path = DEFAULT_ROOT) -> list[str]:
    """Remove sandboxes whose owning runner is gone (crashed or killed), and every cgroup of a
    sandbox whose runner is gone, wherever it is. Returns the names of the folders removed.
    Blocking (processes, files, cgroups): call it from a thread in async code."""
    removed: list[str] = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            owner = None
            try:
                if time.time() - folder.stat().st_mtime < OWNERLESS_GRACE_SEC:
                    continue  # being made right now
            except OSError:
                continue
        if owner and process_alive(owner["runner_pid"], owner.get("runner_start")):
            continue
        if owner and owner.get("holder_pid") and process_alive(owner["holder_pid"], owner.get("holder_start")):
            kill_tree(owner["holder_pid"])
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    limits.clean_stale()
    return removed
