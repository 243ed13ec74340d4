"""The background sessions' CPU weight, on this kernel (autogroups are on in most distributions)."""

import subprocess
from pathlib import Path

import pytest

from tbconsole.cpushare import RUNNER_SESSION_NICE, SANDBOX_SESSION_NICE, lower_session_weight


def test_a_session_and_its_children_run_at_the_lower_weight():
    if not Path("/proc/self/autogroup").exists():
        pytest.skip("this kernel has no autogroups: nothing to lower")
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        lower_session_weight(leader.pid, RUNNER_SESSION_NICE)
        assert Path(f"/proc/{leader.pid}/autogroup").read_text().split()[-1] == str(RUNNER_SESSION_NICE)
        own = Path("/proc/self/autogroup").read_text().split()
        assert own[0] != Path(f"/proc/{leader.pid}/autogroup").read_text().split()[0], "not its own session"
    finally:
        leader.kill()
        leader.wait()
    assert SANDBOX_SESSION_NICE > RUNNER_SESSION_NICE > 0  # agents yield to the runner, both to the console


def test_a_process_already_gone_is_left_alone():
    gone = subprocess.Popen(["true"])
    gone.wait()
    lower_session_weight(gone.pid, SANDBOX_SESSION_NICE)  # no error: nothing to lower
