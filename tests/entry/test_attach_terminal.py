"""`tbconsole attach` end to end in a real terminal (tmux): replay of a finished run, and control
of a run going on in another process (the synthetic runner of `python -m tbconsole.entry.attach
demo-events`, which obeys a real RunControl through its control inbox)."""

import subprocess
import sys

import pytest

from tbconsole.record.events import ControlChanged, read_events
from tbconsole.synthetic.run import record_run

from tests_support.paths import FIXTURES
from tests_support.tmux import TmuxServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


@pytest.fixture
def tmux():
    server = TmuxServer()
    yield server
    server.kill()


def test_attach_replays_a_finished_run(tmux, tmp_path):
    # The finished fixture's run, recorded with its capture files (the transcript's source).
    record_run(tmp_path / "run", error_at=(1, 2), pause_after=0)
    tmux.start("t", f"{sys.executable} -m tbconsole.entry.attach attach {tmp_path / 'run'}", width=120, height=36)
    screen = tmux.wait_for("t", "DONE")
    assert "replay" in screen and "step 2 · 3/3 trained" in screen and "trials · step 2" in screen
    tmux.wait_for("t", "] step")  # the replay keys are offered once the run is loaded
    tmux.keys("t", "{")
    tmux.wait_for("t", "step – · 0/3 trained")
    tmux.keys("t", "]")
    tmux.wait_for("t", "trials · step 0")
    tmux.keys("t", "Enter")
    screen = tmux.wait_for("t", "verifier")
    assert "␛" in screen or "<U+202E>" in screen  # escapes from model/tool output are shown inert
    tmux.keys("t", "Escape", "q")


def test_attach_controls_a_run_in_another_process(tmux, tmp_path):
    log_path = tmp_path / "run"
    run = f"{sys.executable} -m tbconsole.entry.attach demo-events --steps 6 --speed 6 --log-path {log_path}"
    tmux.start("runner", run, width=120, height=36)
    tmux.wait_for("runner", "RUNNING")
    tmux.start("viewer", f"{sys.executable} -m tbconsole.entry.attach attach {log_path}", width=120, height=36)
    tmux.wait_for("viewer", "attached")
    tmux.wait_for("viewer", "p Pause")
    tmux.keys("viewer", "p")
    tmux.wait_for("viewer", "PAUSING AFTER BATCH")
    tmux.wait_for("runner", "PAUSING AFTER BATCH")  # the run itself got it
    tmux.wait_for("viewer", "PAUSED", timeout=40)
    states = [e.state for e in read_events(log_path / "events.jsonl") if isinstance(e, ControlChanged)]
    assert states[-2:] == ["pausing", "paused"]
    tmux.keys("viewer", "p")  # resume
    tmux.wait_for("viewer", "RUNNING")
    tmux.keys("viewer", "a")
    tmux.wait_for("viewer", "Abort the run now?")
    tmux.keys("viewer", "y")
    tmux.wait_for("viewer", "ABORTED", timeout=30)


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
