"""`tbconsole attach` end to end in a real terminal (tmux): replay of a finished run, and control
of a run going on in another process (the synthetic runner of `python -m tbconsole.ui.cli
demo-events`, which obeys a real RunControl through its control inbox)."""

import subprocess
import sys
import time
import uuid

import pytest

from tbconsole.events import ControlChanged, read_events
from tbconsole.ui.synthetic import record_run

from conftest import FIXTURES
from tests_support import need_tmux

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def _tmux_present():
    need_tmux()


class Tmux:
    def __init__(self, command: str, width=120, height=36):
        self.name = f"tbc-{uuid.uuid4().hex[:8]}"
        command = f"env -u COLUMNS -u LINES {command}"  # the terminal decides the size
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), command], check=True
        )
        # a tmux server started earlier may impose its size: pin this window's
        subprocess.run(["tmux", "set-option", "-t", self.name, "window-size", "manual"], capture_output=True)
        subprocess.run(
            ["tmux", "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)], capture_output=True
        )

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-t", self.name, "-p"], capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, text: str, timeout=20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not on screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def tmux_sessions():
    sessions = []
    yield sessions
    for s in sessions:
        s.close()


def test_attach_replays_a_finished_run(tmux_sessions, tmp_path):
    # The finished fixture's run, recorded with its capture files (the transcript's source).
    record_run(tmp_path / "run", error_at=(1, 2), pause_after=0)
    t = Tmux(f"{sys.executable} -m tbconsole.ui.cli attach {tmp_path / 'run'}")
    tmux_sessions.append(t)
    screen = t.wait_for("DONE")
    assert "replay" in screen and "step 2 · 3/3 trained" in screen and "trials · step 2" in screen
    t.wait_for("] step")  # the replay keys are offered once the run is loaded
    t.keys("{")
    t.wait_for("step – · 0/3 trained")
    t.keys("]")
    screen = t.wait_for("trials · step 0")
    t.keys("Enter")
    screen = t.wait_for("verifier")
    assert "␛" in screen or "<U+202E>" in screen  # escapes from model/tool output are shown inert
    t.keys("Escape", "q")


def test_attach_controls_a_run_in_another_process(tmux_sessions, tmp_path):
    log_path = tmp_path / "run"
    runner = Tmux(f"{sys.executable} -m tbconsole.ui.cli demo-events --steps 6 --speed 6 --log-path {log_path}")
    tmux_sessions.append(runner)
    runner.wait_for("RUNNING")
    viewer = Tmux(f"{sys.executable} -m tbconsole.ui.cli attach {log_path}")
    tmux_sessions.append(viewer)
    screen = viewer.wait_for("attached")
    viewer.wait_for("p Pause")
    viewer.keys("p")
    viewer.wait_for("PAUSING AFTER BATCH")
    runner.wait_for("PAUSING AFTER BATCH")  # the run itself got it
    viewer.wait_for("PAUSED", timeout=40)
    states = [e.state for e in read_events(log_path / "events.jsonl") if isinstance(e, ControlChanged)]
    assert states[-2:] == ["pausing", "paused"]
    viewer.keys("p")  # resume
    viewer.wait_for("RUNNING")
    viewer.keys("a")
    viewer.wait_for("Abort the run now?")
    viewer.keys("y")
    viewer.wait_for("ABORTED", timeout=30)
    assert screen


def test_attach_screenshot_writes_the_replayed_console_as_svg(tmp_path):
    out = tmp_path / "shots" / "run.svg"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "attach",
            str(FIXTURES / "finished"),
            "--screenshot",
            str(out),
            "--size",
            "120x36",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and "DONE" in svg and "rewards" in svg
    assert "[replay]" in svg and "[live]" not in svg
    assert [p.name for p in out.parent.iterdir()] == ["run.svg"]  # no temporary file left
    # A run still going (this one waits for a decision) is shot as live, not as a replay.
    live = tmp_path / "live.svg"
    shot = subprocess.run(
        [sys.executable, "-m", "tbconsole", "attach", str(FIXTURES / "awaiting"), "--screenshot", str(live)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.returncode == 0, shot.stderr
    assert "[live]" in live.read_text() and "[replay]" not in live.read_text()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "attach",
            str(FIXTURES / "finished"),
            "--screenshot",
            str(out),
            "--size",
            "wide",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--size" in bad.stderr and "Traceback" not in bad.stderr
