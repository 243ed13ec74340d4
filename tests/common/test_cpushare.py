"""The background sessions' CPU weight, on this kernel (autogroups are on in most distributions)."""

import subprocess
import uuid
from pathlib import Path

import pytest

from tbconsole.common.cpushare import RUNNER_SESSION_NICE, SANDBOX_SESSION_NICE, lower_session_weight, nice_weight
from tbconsole.sandbox import limits

from tests_support.prereqs import missing

pytestmark = pytest.mark.e2e


def test_a_session_and_its_children_run_at_the_lower_weight():
    if not Path("/proc/self/autogroup").exists():
        missing("this kernel has no autogroups: nothing to lower", "Use a kernel with CONFIG_SCHED_AUTOGROUP.")
    leader = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        lower_session_weight(leader.pid, RUNNER_SESSION_NICE)
        leaders = Path(f"/proc/{leader.pid}/autogroup").read_text().split()  # "/autogroup-N nice K"
        assert leaders[-1] == str(RUNNER_SESSION_NICE)
        # A process in the kernel's root autogroup (e.g. one started by init, as under a CI
        # service) reads an empty file: the new session is still a group of its own.
        own = Path("/proc/self/autogroup").read_text().split() or ["root"]
        assert own[0] != leaders[0], "not its own session"
    finally:
        leader.kill()
        leader.wait()
    assert SANDBOX_SESSION_NICE > RUNNER_SESSION_NICE > 0  # agents yield to the runner, both to the console


def test_a_process_already_gone_is_left_alone():
    gone = subprocess.Popen(["true"])
    gone.wait()
    lower_session_weight(gone.pid, SANDBOX_SESSION_NICE)  # no error: nothing to lower


def test_weights_follow_the_kernels_nice_table():
    assert [nice_weight(n) for n in (0, 1, 5, 10, 19)] == [1024, 819, 336, 110, 15]


def test_a_sandbox_cgroup_with_the_cpu_controller_is_weighed_as_its_session_would_be():
    """A sandbox's own cgroup is what the scheduler weighs (its session's nice no longer counts):
    it must get the same lower weight, or eight busy agents each weigh as much as the console."""
    made, note = limits.create(f"weight-{uuid.uuid4().hex[:8]}", memory_mb=None, cpus=1)
    if made is None:
        missing(f"no cgroups here: {note}", "Run the tests as root with cgroup v2 mounted.")
    try:
        expected = {  # v2's cpu.weight is 100 at nice 0, v1's cpu.shares 1024
            "cpu.weight": round(nice_weight(SANDBOX_SESSION_NICE) * 100 / 1024),
            "cpu.shares": nice_weight(SANDBOX_SESSION_NICE),
        }
        weighed = {
            name: int((path / name).read_text()) for path in made.paths for name in expected if (path / name).exists()
        }
        assert weighed, f"no cpu controller in {made.paths}"
        assert weighed == {name: expected[name] for name in weighed}
    finally:
        made.remove()
