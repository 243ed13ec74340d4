"""The runner's signals: the first SIGINT/SIGTERM (SIGHUP in the foreground) stops the run
cleanly after its batch, the next aborts, and a run waiting for a decision aborts at once; with
a real headless demo, SIGTERM mid-batch ends it stopped, with a checkpoint, exit 0 and nothing
left behind, and the same command resumes it at the next batch."""

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from tbconsole.entry.run import SignalStop
from tbconsole.record.control import RunControl
from tbconsole.record.enums import ControlState, RunnerState, RunStatus
from tbconsole.record.events import LogLine, read_events
from tbconsole.record.lease import read_lease
from tbconsole.record.runfolder import RunFolder

from tests_support.detached import SMALL, assert_stopped_cleanly, demo_env, wait_mid_batch
from tests_support.processes import pids_with, sandbox_cgroups_of
from tests_support.waiting import wait_until

pytestmark = pytest.mark.e2e


async def _signal(signum: int, handled=None) -> None:
    """Signal this process and let the loop run the handler: until ``handled()`` holds, or (a
    signal that changes nothing) a few turns of the loop, which read its wakeup pipe and run it."""
    os.kill(os.getpid(), signum)
    for turn in range(10_000):
        if handled() if handled is not None else turn >= 10:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"signal {signum} not handled")


async def test_hangup_stops_after_the_batch_and_the_next_signal_aborts():
    seen = []
    control = RunControl(seen.append)
    signals = SignalStop(control, seen.append)
    with signals.installed(asyncio.get_running_loop(), detached=False):
        await _signal(signal.SIGHUP, lambda: control.state == ControlState.STOPPING)
        assert control.state == ControlState.STOPPING and signals.cause(RunStatus.STOPPED) == "on SIGHUP"
        await _signal(signal.SIGTERM, lambda: control.state == ControlState.ABORTING)
        assert control.state == ControlState.ABORTING and signals.cause(RunStatus.ABORTED) == "on SIGTERM"
        await _signal(signal.SIGINT)  # nothing more to do
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert [e.message for e in seen if isinstance(e, LogLine)] == [
        "SIGHUP: stopping after the current batch (again: abort)",
        "SIGTERM: aborting",
    ]


async def test_a_run_waiting_for_a_decision_aborts_on_the_first_signal():
    control = RunControl(lambda e: None)
    signals = SignalStop(control, lambda e: None)
    with signals.installed(asyncio.get_running_loop(), detached=True):
        decision = asyncio.create_task(control.ask(0, 0, default="abort", timeout=None))
        for _ in range(100):
            if control.state == ControlState.AWAITING_DECISION:
                break
            await asyncio.sleep(0)
        assert control.state == ControlState.AWAITING_DECISION
        await _signal(signal.SIGTERM, decision.done)
        assert await decision == "abort" and control.abort_requested.is_set()
        assert signals.cause(RunStatus.ABORTED) == "on SIGTERM"


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_mid_batch_stops_a_headless_run_cleanly_then_the_same_command_resumes(tmp_path, sandbox_root):
    # Streaming minibatches (their groups run in tasks nobody awaits: the stop at the batch boundary
    # reaches the loop's driver from one of them); a console's stop of a synchronous run is in
    # test_detached, an off-policy stop in test_offpolicy_e2e.
    log = tmp_path / "run"
    stream = ["config.stream_minibatch_config.groups_per_batch=1", "config.stream_minibatch_config.num_minibatches=1"]
    args = ["demo", "--headless", f"config.log_path={log}", *SMALL, *stream, "config.max_steps=3"]
    run = subprocess.Popen(
        [sys.executable, "-m", "tbconsole", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=demo_env(sandbox_root),
    )
    try:
        step = wait_mid_batch(log, lambda: run.poll() is None)
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out[-3000:]
    assert "Traceback" not in out
    resume_at = assert_stopped_cleanly(log, "stopped on SIGTERM")
    assert resume_at == step + 1  # the batch in flight was trained
    assert read_lease(log).state is RunnerState.ENDED
    wait_until(lambda: pids_with(str(sandbox_root)) == [], 10, lambda: "sandbox processes left")
    assert sandbox_cgroups_of(run.pid) == []

    # The same command again, one step further: it resumes at the batch after the last trained one.
    args[-1] = f"config.max_steps={resume_at + 1}"
    again = subprocess.run(
        [sys.executable, "-m", "tbconsole", *args], capture_output=True, text=True, env=demo_env(sandbox_root)
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    seen = list(read_events(RunFolder(log).events))
    assert [e.start_step for e in seen if e.kind == "run.started"] == [0, resume_at]
    trained = [json.loads(line)["step"] for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert trained == list(range(resume_at + 1))  # every batch once: none lost, none trained twice
    assert [e.status for e in seen if e.kind == "run.ended"] == ["stopped", "done"]
