"""Prerequisites a test needs from the machine: skipped on a developer's machine, failed in CI."""

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

CGROUP_FIX = "Run the tests as root on a host with a writable cgroup v2 (or v1 memory and cpu) hierarchy."


def missing(what: str, fix: str) -> None:
    """A prerequisite is missing: skip on a developer's machine, fail in CI (``CI=true``), where
    a skip would hide a failure, saying how to provide it."""
    if IN_CI:
        pytest.fail(f"{what} (CI=true: prerequisites must be present). {fix}", pytrace=False)
    pytest.skip(what)


def need_tmux() -> None:
    if shutil.which("tmux") is None:
        missing("tmux is not installed", "Install it: apt-get install tmux.")
