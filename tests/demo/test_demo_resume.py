"""Rerunning `tbconsole demo` (no config.log_path) goes on with the newest demo of its kind that ended
before its last step and that nobody runs; otherwise it starts a new one. The choice is read from
run folders holding what a run writes: its events (a recorded run's), the runner's lease (taken and
let go by a real Lease, or held by a real process) and the cookbook's checkpoints.jsonl."""

import json
import os
import signal
from pathlib import Path

import pytest

from tbconsole.demo import recipe as demo
from tbconsole.record.lease import Lease

from tests_support.paths import FIXTURES

pytestmark = pytest.mark.timeout(120)

RECORDED = FIXTURES / "finished" / "events.jsonl"
STOPPED_AFTER = 440  # the recorded run's lines up to step 1's checkpoint: 2 of its 3 steps trained
ONE_COMMAND = demo.kind_of([])
MULTI_TURN = demo.kind_of(demo.multi_turn_argv([demo.MULTI_TURN_FLAG]))


def demo_command(folder: Path, *keys: str) -> list[str]:
    """What `tbconsole demo` records in its lease: its keys, then the run folder it chose."""
    return ["tbconsole", "demo", *keys, f"config.log_path={folder}"]


def write_run(folder: Path, end: str | None, *, when: float, keys: tuple[str, ...] = (), lease: bool = True) -> Path:
    """A demo folder whose run ended with ``end`` after 2 of 3 steps (``done``: all 3), or went
    on (None); its last event at ``when``."""
    lines = RECORDED.read_text().splitlines()
    if end != "done":
        lines = lines[:STOPPED_AFTER]
        if end:
            ts = json.loads(lines[-1])["ts"] + 1
            for state in ("stopping", end):
                lines.append(json.dumps({"v": 1, "kind": "control.changed", "ts": ts, "state": state, "reason": None}))
            lines.append(json.dumps({"v": 1, "kind": "run.ended", "ts": ts, "status": end, "step": 2, "message": None}))
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "checkpoints.jsonl").write_text(
        json.dumps({"name": "000002", "batch": 2, "state_path": "tinker://demo-0/weights/000002"}) + "\n"
    )
    if lease:
        Lease(folder, demo_command(folder, *keys)).acquire().release()
    for name in ("events.jsonl", "runner.json") if lease else ("events.jsonl",):
        os.utime(folder / name, (when, when))
    return folder


def test_no_demo_yet_starts_a_new_one(tmp_path):
    assert demo.resumable_run(tmp_path / "runs", ONE_COMMAND) is None
    (tmp_path / "runs").mkdir()
    assert demo.resumable_run(tmp_path / "runs", ONE_COMMAND) is None


def test_the_newest_stopped_demo_of_the_kind_is_resumed_at_its_checkpoint(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "demo-20260101-100000", "stopped", when=1000)
    newest = write_run(runs / "demo-20260101-110000", "stopped", when=2000)
    write_run(runs / "demo-20260101-120000", "stopped", when=3000, keys=tuple(demo.multi_turn_argv(["--multi-turn"])))
    write_run(runs / "demo-20260101-130000", "done", when=4000, lease=False)  # no lease: not a demo it started
    assert demo.resumable_run(runs, ONE_COMMAND) == demo.Resumable(newest, 2)
    assert demo.resumable_run(runs, MULTI_TURN) == demo.Resumable(runs / "demo-20260101-120000", 2)


@pytest.mark.parametrize("end", ["aborted", "failed"])
def test_a_demo_that_ended_otherwise_before_its_last_step_is_resumed_too(tmp_path, end):
    folder = write_run(tmp_path / "runs" / "demo-1", end, when=1000)
    assert demo.resumable_run(tmp_path / "runs", ONE_COMMAND) == demo.Resumable(folder, 2)


def test_a_finished_newest_demo_means_a_new_one_even_with_an_older_stopped_one(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs / "demo-1", "stopped", when=1000)
    write_run(runs / "demo-2", "done", when=2000)
    assert demo.resumable_run(runs, ONE_COMMAND) is None


@pytest.mark.e2e
def test_a_live_demo_is_never_taken_and_one_whose_runner_died_is(tmp_path, hold_lease):
    runs = tmp_path / "runs"
    live = write_run(runs / "demo-live", None, when=1000, lease=False)
    holder = hold_lease(live, demo_command(live))
    assert demo.resumable_run(runs, ONE_COMMAND) is None
    os.kill(holder.pid, signal.SIGKILL)  # the runner dies mid-run: no run.ended
    holder.wait()
    assert demo.resumable_run(runs, ONE_COMMAND) == demo.Resumable(live, 2)


def test_only_demos_count(tmp_path):
    runs = tmp_path / "runs"
    folder = write_run(runs / "demo-1", "stopped", when=1000, lease=False)
    Lease(folder, ["tbconsole", "train", f"config.log_path={folder}"]).acquire().release()
    assert demo.resumable_run(runs, ONE_COMMAND) is None
