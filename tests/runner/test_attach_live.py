"""`tbconsole attach` in a real terminal (tmux) over a real demo run in another process: `p`
pauses the run after its batch, `p` again resumes it."""

import os
import subprocess
import sys

import pytest

from tbconsole.events import ControlChanged, read_events

from tests_support import TmuxServer, wait_until

pytestmark = [pytest.mark.root, pytest.mark.slow]


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
            "config.kl_penalty_coef=0",  # KL is not under test here
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    tmux = TmuxServer()
    try:
        wait_until((log / "events.jsonl").exists, 120, lambda: "the run wrote no events.jsonl")
        tmux.start("attach", f"{sys.executable} -m tbconsole attach {log}", width=120, height=36)
        tmux.wait_for("attach", "p Pause", 30)
        tmux.keys("attach", "p")
        tmux.wait_for("attach", "PAUSED", 300)  # the run finished and trained its batch, then stopped
        assert _states(log)[-2:] == ["pausing", "paused"]
        events = list(read_events(log / "events.jsonl"))
        paused_at = max(i for i, e in enumerate(events) if isinstance(e, ControlChanged) and e.state == "paused")
        assert any(e.kind == "step.metrics" and e.step == 0 for e in events[:paused_at])
        tmux.keys("attach", "p")  # resume
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
        tmux.kill()
        if run.poll() is None:
            run.kill()
