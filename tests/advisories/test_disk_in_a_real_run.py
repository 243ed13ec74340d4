"""A real demo run whose folder's filesystem fills up: the runner's own watcher raises the disk
advisory (in events.jsonl and the progress log) from the run folder's free space before the run's
writes fail.

The watcher samples the free space every 5 s and a one-step run of this size ends about 6 s after
its group starts, so the run is asked to pause after its first batch: it stays alive (its watcher
with it) however the filling and the checks fall, and goes on once the advisory was seen."""

import json
import os
import subprocess
import sys
import time

import pytest

from tbconsole.record.control import ControlClient

from tests_support.diskfill import fill_disk
from tests_support.runlog import run_events

pytestmark = pytest.mark.e2e

SMALL = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
    "config.kl_penalty_coef=0",  # no reference model to load and score against: KL is not under test here
    "config.max_steps=2",
]
FAILURES = ("proxy.capture_lost", "error.raised")


@pytest.mark.root
@pytest.mark.slow
def test_a_real_run_raises_the_disk_advisory_before_its_writes_fail(tmpfs):
    disk = tmpfs("700m")
    log = disk / "run"
    run = subprocess.Popen(
        [sys.executable, "-m", "tbconsole", "demo", "--headless", f"config.log_path={log}", *SMALL,
         "advise.disk_warn_mib=128", "advise.disk_error_mib=64"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not any(e.kind == "group.started" for e in run_events(log)):
            assert run.poll() is None and time.monotonic() < deadline, "the run did not start a group"
            time.sleep(0.2)
        ControlClient(log).send("pause")  # the run waits after its first batch: alive until resumed
        fill_disk(disk, leave=40 << 20)  # under advise.disk_error_mib: the next check (5 s) sees it
        deadline = time.monotonic() + 60
        while not any(e.kind == "advisory.raised" and e.rule == "disk" for e in run_events(log)):
            assert run.poll() is None, "the run ended before its disk advisory: " + run.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "no disk advisory within 60 s"
            time.sleep(0.2)
        ControlClient(log).send("resume")  # while a command file still fits
        fill_disk(disk, leave=0)
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    lines = [json.loads(line) for line in (log / "events.jsonl").read_text().splitlines()]
    kinds = [line["kind"] for line in lines]
    first = next(i for i, line in enumerate(lines) if line["kind"] == "advisory.raised" and line["rule"] == "disk")
    assert lines[first]["severity"] == "error" and lines[first]["threshold"] == "advise.disk_error_mib=64"
    assert "MiB free on the run folder's filesystem" in lines[first]["message"]
    failed = [i for i, kind in enumerate(kinds) if kind in FAILURES]
    assert all(i > first for i in failed), "a write failed before the disk advisory"
    assert "advisory error [disk]:" in out and "Traceback" not in out, out[-3000:]
    assert kinds[-1] == "run.ended"
