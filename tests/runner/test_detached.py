"""A run in a process of its own, with real processes: the console (in tmux) and the runner it
starts are separate, so losing the console (its terminal closed, the process killed) leaves the
run going, and a console attached later stops it cleanly; `--detach` starts one without a
console; one runner per folder; a runner killed with SIGKILL reads as gone at once."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tbconsole.events import read_events
from tbconsole.lease import RunnerState, read_lease
from tbconsole.runfolder import RunFolder

from tests_support import need_tmux, pids_with

pytestmark = [pytest.mark.root, pytest.mark.slow]

SMALL = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
]


def demo_env(sandbox_root: Path) -> dict:
    """The test's own sandbox root (checked empty at the end), inherited by every runner."""
    return {**os.environ, "TBCONSOLE_SANDBOX_ROOT": str(sandbox_root), "PYTHONUNBUFFERED": "1"}


def events(log: Path) -> list:
    path = RunFolder(log).events
    return list(read_events(path)) if path.exists() else []


def wait(predicate, timeout: float, what) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)


def batch_in_flight(log: Path) -> int | None:
    """A batch whose groups have started and that is not trained yet."""
    seen = events(log)
    started = {e.step for e in seen if e.kind == "group.started"}
    trained = {e.step for e in seen if e.kind == "step.metrics"}
    return min(started - trained, default=None)


def wait_mid_batch(log: Path, alive, timeout: float = 300) -> int:
    wait(lambda: batch_in_flight(log) is not None or not alive(), timeout, lambda: "no batch started")
    assert alive(), "the runner ended before its batch"
    step = batch_in_flight(log)
    assert step is not None
    return step


def wait_trained(log: Path, step: int, timeout: float = 300) -> None:
    wait(
        lambda: any(e.kind == "step.metrics" and e.step == step for e in events(log)),
        timeout,
        lambda: f"step {step} was not trained:\n{RunFolder(log).runner_log.read_text()[-3000:]}",
    )


def assert_stopped_cleanly(log: Path, cause: str | None = None) -> int:
    """run.ended says stopped (and why), and a checkpoint lets the same command resume after
    the last trained batch; returns that batch."""
    ended = [e for e in events(log) if e.kind == "run.ended"]
    assert [e.status for e in ended] == ["stopped"], ended
    if cause is not None:
        assert cause in ended[0].message, ended[0].message
    last = json.loads((log / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert last["batch"] == ended[0].step
    return ended[0].step


class Tmux:
    """A tmux server of the test's own."""

    def __init__(self, env: dict):
        self.socket = f"tbc-{uuid.uuid4().hex[:8]}"
        self.env = env

    def __call__(self, *args: str, check: bool = True) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, env=self.env, check=check
        ).stdout

    def start(self, name: str, command: str, cwd: Path) -> int:
        """``command`` in a new 160x50 terminal; returns its pid (the command replaces the shell)."""
        self("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(cwd), f"exec {command}")
        return int(self("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])

    def screen(self, name: str) -> str:
        return self("capture-pane", "-t", name, "-p", check=False)

    def kill(self) -> None:
        self("kill-server", check=False)


def python(*args: str) -> str:
    return " ".join([f"env -u COLUMNS -u LINES {sys.executable} -m tbconsole", *args])


@pytest.mark.timeout(900)
def test_the_run_outlives_its_consoles_and_an_attached_console_stops_it(tmp_path, sandbox_root):
    need_tmux()
    log = tmp_path / "run"
    tmux = Tmux(demo_env(sandbox_root))
    runner_pid = None
    try:
        console = tmux.start("demo", python("demo", f"config.log_path={log}", *SMALL, "config.max_steps=5"), tmp_path)
        wait(lambda: read_lease(log).state is RunnerState.LIVE, 180, lambda: tmux.screen("demo"))
        runner_pid = read_lease(log).pid
        assert runner_pid != console and os.getsid(runner_pid) == runner_pid  # a session of its own
        wait(lambda: "Stop" in tmux.screen("demo"), 60, lambda: tmux.screen("demo"))  # the console is attached

        def alive() -> bool:
            return read_lease(log).state is RunnerState.LIVE

        # The terminal closes mid-batch (SIGHUP to the console): the runner trains the batch and goes on.
        step = wait_mid_batch(log, alive)
        tmux("kill-session", "-t", "demo")
        wait(lambda: not os.path.exists(f"/proc/{console}"), 30, lambda: "the console outlived its terminal")
        os.kill(runner_pid, signal.SIGHUP)  # a detached runner has no terminal to lose: it ignores SIGHUP
        wait_trained(log, step)

        # A console attached later is killed mid-batch: the same.
        attached = tmux.start("attach", python("attach", str(log)), tmp_path)
        wait(lambda: "Stop" in tmux.screen("attach"), 60, lambda: tmux.screen("attach"))
        step = wait_mid_batch(log, alive)
        os.kill(attached, signal.SIGKILL)
        wait_trained(log, step)
        assert alive()

        # Another one stops the run: it finishes and trains its batch, checkpoints, exits 0.
        tmux.start("stop", python("attach", str(log)), tmp_path)
        wait(lambda: "Stop" in tmux.screen("stop"), 60, lambda: tmux.screen("stop"))
        tmux("send-keys", "-t", "stop", "s")
        wait(lambda: "Stop run" in tmux.screen("stop"), 30, lambda: tmux.screen("stop"))
        tmux("send-keys", "-t", "stop", "y")
        wait(lambda: read_lease(log).state is RunnerState.ENDED, 300, lambda: tmux.screen("stop"))
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
    assert str(RunFolder(log).runner_log) in lines[0] and f"tbconsole attach {log}" in lines[0]
    os.kill(runner_pid, signal.SIGSTOP)  # held where it is (still holding the folder): no trial starts
    try:
        second = subprocess.run(
            [sys.executable, "-m", "tbconsole", *args, "--headless"], capture_output=True, text=True, env=env
        )
        assert second.returncode == 2, second.stderr
        assert f"pid {runner_pid}" in second.stderr and f"tbconsole attach {log}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        os.kill(runner_pid, signal.SIGKILL)
    killed = time.monotonic()
    wait(lambda: read_lease(log).state is RunnerState.GONE, 10, lambda: f"{read_lease(log)}")
    assert time.monotonic() - killed < 10
