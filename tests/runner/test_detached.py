"""A run in a process of its own, with real processes: the console (in tmux) and the runner it
starts are separate, so losing the console (its terminal closed, the process killed) leaves the
run going, and a console attached later pauses it after its batch, resumes it and stops it
cleanly; `--detach` starts one without a console; one runner per folder; a runner killed with
SIGKILL reads as gone at once."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tbconsole.common.formatting import command_line
from tbconsole.record.enums import RunnerState
from tbconsole.record.events import ControlChanged
from tbconsole.record.lease import read_lease
from tbconsole.record.runfolder import RunFolder

from tests_support.detached import SMALL, assert_stopped_cleanly, demo_env, wait_mid_batch
from tests_support.processes import pids_with
from tests_support.runlog import run_events
from tests_support.tmux import TmuxServer
from tests_support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]


def control_states(log: Path) -> list[str]:
    return [e.state for e in run_events(log) if isinstance(e, ControlChanged)]


def last_index(log: Path, which) -> int:
    return max(i for i, e in enumerate(run_events(log)) if which(e))


def wait_trained(log: Path, step: int, timeout: float = 300) -> None:
    wait_until(
        lambda: any(e.kind == "step.metrics" and e.step == step for e in run_events(log)),
        timeout,
        lambda: f"step {step} was not trained:\n{RunFolder(log).runner_log.read_text()[-3000:]}",
    )


def python(*args: str) -> str:
    return " ".join([f"{sys.executable} -m tbconsole", *args])


@pytest.mark.timeout(900)
def test_the_run_outlives_its_consoles_and_an_attached_console_pauses_resumes_and_stops_it(tmp_path, sandbox_root):
    log = tmp_path / "run"
    tmux = TmuxServer(demo_env(sandbox_root))
    runner_pid = None
    try:
        console = tmux.start("demo", python("demo", f"config.log_path={log}", *SMALL, "config.max_steps=7"), tmp_path)
        wait_until(lambda: read_lease(log).state is RunnerState.LIVE, 180, lambda: tmux.screen("demo"))
        runner_pid = read_lease(log).pid
        assert runner_pid != console and os.getsid(runner_pid) == runner_pid  # a session of its own
        wait_until(lambda: "Stop" in tmux.screen("demo"), 60, lambda: tmux.screen("demo"))  # the console is attached

        def alive() -> bool:
            return read_lease(log).state is RunnerState.LIVE

        # The terminal closes mid-batch (SIGHUP to the console): the runner trains the batch and goes on.
        step = wait_mid_batch(log, alive)
        tmux("kill-session", "-t", "demo")
        wait_until(lambda: not os.path.exists(f"/proc/{console}"), 30, lambda: "the console outlived its terminal")
        os.kill(runner_pid, signal.SIGHUP)  # a detached runner has no terminal to lose: it ignores SIGHUP
        wait_trained(log, step)

        # A console attached later is killed mid-batch: the same.
        attached = tmux.start("attach", python("attach", str(log)), tmp_path)
        wait_until(lambda: "Stop" in tmux.screen("attach"), 60, lambda: tmux.screen("attach"))
        step = wait_mid_batch(log, alive)
        os.kill(attached, signal.SIGKILL)
        wait_trained(log, step)
        assert alive()

        # Another one pauses the run after its batch (`p`), resumes it (`p` again), then stops it:
        # it finishes and trains its batch, checkpoints, exits 0.
        tmux.start("stop", python("attach", str(log)), tmp_path)
        tmux.wait_for("stop", "p Pause", 60)
        tmux.keys("stop", "p")
        tmux.wait_for("stop", "PAUSED", 300)  # the batch in flight was trained, then the run held
        assert control_states(log)[-2:] == ["pausing", "paused"]
        paused_at = last_index(log, lambda e: isinstance(e, ControlChanged) and e.state == "paused")
        held = len(run_events(log))
        tmux.keys("stop", "p")  # resume
        wait_until(lambda: control_states(log)[-1] == "running", 60, lambda: tmux.screen("stop"))
        # nothing started while it was paused: the next batch's groups came only after the resume
        resumed_at = last_index(log, lambda e: isinstance(e, ControlChanged) and e.state == "running")
        assert resumed_at >= held and not [
            e for e in run_events(log)[paused_at:resumed_at] if e.kind == "group.started"
        ]
        wait_until(lambda: "Stop" in tmux.screen("stop"), 60, lambda: tmux.screen("stop"))
        tmux.keys("stop", "s")
        wait_until(lambda: "Stop run" in tmux.screen("stop"), 30, lambda: tmux.screen("stop"))
        tmux.keys("stop", "y")
        wait_until(lambda: read_lease(log).state is RunnerState.ENDED, 300, lambda: tmux.screen("stop"))
    finally:
        tmux.kill()
        if runner_pid is not None and read_lease(log).state is RunnerState.LIVE:
            os.kill(runner_pid, signal.SIGKILL)
    assert_stopped_cleanly(log)
    assert RunFolder(log).runner_log.read_text().rstrip().endswith("runner exit status 0")
    assert pids_with(str(sandbox_root)) == []


@pytest.mark.timeout(300)
def test_detach_says_where_the_runner_is_a_second_runner_is_refused_and_kill_9_reads_gone(tmp_path, sandbox_root):
    log = tmp_path / "run"
    env = demo_env(sandbox_root)
    args = ["demo", f"config.log_path={log}", *SMALL, "config.max_steps=1"]
    started = subprocess.run(
        [sys.executable, "-m", "tbconsole", *args, "--detach"], capture_output=True, text=True, env=env, timeout=180
    )
    assert started.returncode == 0, started.stderr
    runner_pid = read_lease(log).pid
    lines = started.stdout.strip().splitlines()
    assert len(lines) == 1 and f"pid {runner_pid}" in lines[0], started.stdout
    assert str(RunFolder(log).runner_log) in lines[0] and command_line("attach", log) in lines[0]
    os.kill(runner_pid, signal.SIGSTOP)  # held where it is (still holding the folder): no trial starts
    try:
        second = subprocess.run(
            [sys.executable, "-m", "tbconsole", *args, "--headless"], capture_output=True, text=True, env=env
        )
        assert second.returncode == 2, second.stderr
        assert f"pid {runner_pid}" in second.stderr and command_line("attach", log) in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        os.kill(runner_pid, signal.SIGKILL)
    # the lease reads the holder's liveness, not a heartbeat's age: gone as soon as the pid is
    wait_until(lambda: read_lease(log).state is RunnerState.DEAD, 30, lambda: f"{read_lease(log)}")
