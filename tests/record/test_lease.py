"""The runner's lease, with real processes: one runner per folder, and a runner killed with
SIGKILL reads as gone at once on its host (the kernel drops its lock)."""

import json
import os
import signal
import time

import pytest

from tbconsole.record.enums import RunnerState
from tbconsole.record.lease import Lease, LeaseHeld, read_lease
from tbconsole.record.runfolder import LEASE_FILE


def test_no_runner_ever(tmp_path):
    assert read_lease(tmp_path).state is RunnerState.NONE


@pytest.mark.e2e
def test_a_second_runner_is_refused_and_a_killed_one_reads_gone(tmp_path, hold_lease):
    proc = hold_lease(tmp_path, ["tbconsole", "train", "config.api_key=sk-secret-123"])
    try:
        view = read_lease(tmp_path)
        assert view.state is RunnerState.LIVE and view.pid == proc.pid
        assert "sk-secret-123" not in (tmp_path / LEASE_FILE).read_text()  # the command is kept, redacted
        with pytest.raises(LeaseHeld, match=f"pid {proc.pid}.*tbconsole attach"):
            Lease(tmp_path).acquire()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    gone = read_lease(tmp_path)
    assert gone.state is RunnerState.DEAD and gone.pid == proc.pid
    assert gone.describe().startswith(f"runner gone (pid {proc.pid}, last seen")
    with Lease(tmp_path, ["tbconsole", "demo"]):  # the folder is free again: a resume takes it
        assert read_lease(tmp_path).state is RunnerState.LIVE
    ended = read_lease(tmp_path)
    assert ended.state is RunnerState.ENDED and ended.command == ("tbconsole", "demo")


def test_the_beat_goes_on_and_another_hosts_runner_is_judged_by_it(tmp_path, monkeypatch):
    monkeypatch.setattr("tbconsole.record.lease.BEAT_SECONDS", 0.05)
    with Lease(tmp_path):
        first = read_lease(tmp_path).beat
        deadline = time.time() + 10
        while read_lease(tmp_path).beat == first and time.time() < deadline:
            time.sleep(0.02)
        assert read_lease(tmp_path).beat > first
    info = json.loads((tmp_path / LEASE_FILE).read_text())
    info.update(host="elsewhere", ended=None, beat=time.time())
    (tmp_path / LEASE_FILE).write_text(json.dumps(info))
    assert read_lease(tmp_path).state is RunnerState.LIVE  # no lock to ask on another host: a fresh beat
    assert read_lease(tmp_path, now=time.time() + 60).state is RunnerState.DEAD
