"""Host processes and sandbox cgroups: what a test checks is gone after it."""

import os
from pathlib import Path


def pids_with(marker: str) -> list[int]:
    """Host pids whose command line contains marker."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def sandbox_cgroups_of(owner_pid: int) -> list[Path]:
    """Sandbox cgroups (any hierarchy) whose owner is ``owner_pid`` (names carry their owner)."""
    from tbconsole.sandbox import limits

    found = []
    for mount in limits._cgroup_mounts():
        for dirpath, dirnames, _ in os.walk(mount):
            for name in dirnames:
                if name.startswith(limits.PREFIX) and f".{owner_pid}." in name:
                    found.append(Path(dirpath) / name)
    return found
