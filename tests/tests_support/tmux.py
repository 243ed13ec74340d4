"""A tmux server of a test's own, for the console in a real terminal."""

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests_support.prereqs import need_tmux
from tests_support.waiting import wait_until


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
