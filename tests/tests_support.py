"""Small helpers shared by tests."""

import os
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(what: str, fix: str) -> None:
    """A prerequisite is missing: skip on a developer's machine, fail in CI (``CI=true``), where
    a skip would hide a failure, saying how to provide it."""
    if IN_CI:
        pytest.fail(f"{what} (CI=true: prerequisites must be present). {fix}", pytrace=False)
    pytest.skip(what)


def need_tmux() -> None:
    import shutil

    if shutil.which("tmux") is None:
        missing("tmux is not installed", "Install it: apt-get install tmux.")


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
    import os

    from tbconsole.sandbox import limits

    found = []
    for mount in limits._cgroup_mounts():
        for dirpath, dirnames, _ in os.walk(mount):
            for name in dirnames:
                if name.startswith(limits.PREFIX) and f".{owner_pid}." in name:
                    found.append(Path(dirpath) / name)
    return found
