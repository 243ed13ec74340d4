"""`tbconsole attach` in a real terminal (tmux) over a real demo run in another process: `p`
pauses the run after its batch, `p` again resumes it."""

import os
import subprocess
import sys
import time
import uuid

import pytest

from tbconsole.events import ControlChanged, read_events

from tests_support import need_tmux

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _tmux_present():
    need_tmux()


def _screen(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-t", name, "-p"], capture_output=True, text=True).stdout


def _wait(predicate, timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail with ``what()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(what())


def _wait_screen(name: str, text: str, timeout: float) -> None:
    _wait(lambda: text in _screen(name), timeout, lambda: f"{text!r} not on screen:\n{_screen(name)}")


def _states(log) -> list[str]:
    path = log / "events.jsonl"
    return [e.state for e in read_events(path) if isinstance(e, ControlChanged)] if path.exists() else []


def test_attach_pauses_and_resumes_a_real_run(tmp_path):
    log = tmp_path / "run"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "demo",
            "--headless",
            f"config.log_path={log}",
            "config.max_steps=2",
            "config.dataset_builder.groups_per_batch=1",
            "config.dataset_builder.group_size=2",
            "config.max_tokens=64",
            "config.eval_every=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    name = f"tbc-{uuid.uuid4().hex[:8]}"
    try:
        _wait((log / "events.jsonl").exists, 120, lambda: "the run wrote no events.jsonl")
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                name,
                "-x",
                "120",
                "-y",
                "36",
                f"env -u COLUMNS -u LINES {sys.executable} -m tbconsole attach {log}",
            ],
            check=True,
        )
        _wait_screen(name, "p Pause", 30)
        subprocess.run(["tmux", "send-keys", "-t", name, "p"], check=True)
        _wait_screen(name, "PAUSED", 300)  # the run finished and trained its batch, then stopped
        assert _states(log)[-2:] == ["pausing", "paused"]
        events = list(read_events(log / "events.jsonl"))
        paused_at = max(i for i, e in enumerate(events) if isinstance(e, ControlChanged) and e.state == "paused")
        assert any(e.kind == "step.metrics" and e.step == 0 for e in events[:paused_at])
        subprocess.run(["tmux", "send-keys", "-t", name, "p"], check=True)  # resume
        out, _ = run.communicate(timeout=600)
        assert run.returncode == 0, out[-3000:]
        events = list(read_events(log / "events.jsonl"))
        resumed_at = next(
            i for i, e in enumerate(events) if i > paused_at and isinstance(e, ControlChanged) and e.state == "running"
        )
        # the run held step 1 while paused: its first group started only after the resume
        step1 = [i for i, e in enumerate(events) if e.kind in ("batch.started", "group.started") and e.step == 1]
        assert step1 and min(step1) > resumed_at
        assert [e.status for e in events if e.kind == "run.ended"] == ["done"]
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        if run.poll() is None:
            run.kill()
