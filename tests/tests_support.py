"""Small helpers shared by tests."""

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Steps of the demo run recorded once per session (conftest's ``demo_run``). Here, not in
# conftest: tests/ and tests/ui/ each have a conftest, and `from conftest import` finds either.
DEMO_RUN_STEPS = 2
# Its held-out evaluations score each held-out variant once (the demo's default is twice): half
# the trials, the same paths (the held-out evaluation's trials, captures and events).
DEMO_RUN_EVAL_GROUP_SIZE = 1


def missing(what: str, fix: str) -> None:
    """A prerequisite is missing: skip on a developer's machine, fail in CI (``CI=true``), where
    a skip would hide a failure, saying how to provide it."""
    if IN_CI:
        pytest.fail(f"{what} (CI=true: prerequisites must be present). {fix}", pytrace=False)
    pytest.skip(what)


CGROUP_FIX = "Run the tests as root on a host with a writable cgroup v2 (or v1 memory and cpu) hierarchy."


def need_tmux() -> None:
    import shutil

    if shutil.which("tmux") is None:
        missing("tmux is not installed", "Install it: apt-get install tmux.")


def wait_until(predicate: Callable[[], object], timeout: float, what: Callable[[], str]) -> None:
    """Poll ``predicate`` until it holds; fail with ``what()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(what())


class TmuxServer:
    """A tmux server of the test's own (its own socket), so that one test ending its last session,
    which stops that server, never races another test starting a session on a shared one
    ("server exited unexpectedly")."""

    # A command that exits leaves its pane (and last screen) behind, so that a test waiting for
    # text shows what the command printed before it died rather than an empty screen.
    CONFIG = "set -g remain-on-exit on\n"

    def __init__(self, env: dict[str, str] | None = None):
        need_tmux()
        self.socket = f"tbc-{uuid.uuid4().hex[:8]}"
        self.env = env
        self.config = Path(tempfile.mkdtemp(prefix="tbc-tmux-")) / "tmux.conf"
        self.config.write_text(self.CONFIG)

    def __call__(self, *args: str, check: bool = True) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.config), *args],
            capture_output=True, text=True, env=self.env, check=check,
        ).stdout  # fmt: skip

    def start(self, name: str, command: str, cwd: Path | None = None, width: int = 160, height: int = 50) -> int:
        """``command`` in a new terminal of ``width`` x ``height``, sized by the terminal alone (no
        COLUMNS/LINES); returns its pid (the command replaces the shell)."""
        where = ["-c", str(cwd)] if cwd is not None else []
        self("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), *where,
             f"exec env -u COLUMNS -u LINES {command}")  # fmt: skip
        return int(self("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])

    def screen(self, name: str) -> str:
        return self("capture-pane", "-t", name, "-p", check=False)

    def keys(self, name: str, *keys: str) -> None:
        self("send-keys", "-t", name, *keys)

    def wait_for(self, name: str, text: str, timeout: float = 20.0) -> str:
        wait_until(lambda: text in self.screen(name), timeout, lambda: f"{text!r} not on screen:\n{self.screen(name)}")
        return self.screen(name)

    def kill(self) -> None:
        self("kill-server", check=False)
        shutil.rmtree(self.config.parent, ignore_errors=True)


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
