"""A runner in a process of its own (``tbconsole demo`` with a small recipe): its events as it
writes them, a batch in flight, and how it stopped."""

import json
import os
from pathlib import Path

from tests_support.runlog import run_events
from tests_support.waiting import wait_until

SMALL = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
    "config.kl_penalty_coef=0",  # no reference model to load and score against: KL is not under test here
]


def demo_env(sandbox_root: Path) -> dict:
    """The test's own sandbox root (checked empty at the end), inherited by every runner."""
    return {**os.environ, "TBCONSOLE_SANDBOX_ROOT": str(sandbox_root), "PYTHONUNBUFFERED": "1"}


def batch_in_flight(log: Path) -> int | None:
    """A batch whose groups have started and that is not trained yet."""
    seen = run_events(log)
    started = {e.step for e in seen if e.kind == "group.started"}
    trained = {e.step for e in seen if e.kind == "step.metrics"}
    return min(started - trained, default=None)


def wait_mid_batch(log: Path, alive, timeout: float = 300) -> int:
    wait_until(lambda: batch_in_flight(log) is not None or not alive(), timeout, lambda: "no batch started")
    assert alive(), "the runner ended before its batch"
    step = batch_in_flight(log)
    assert step is not None
    return step


def assert_stopped_cleanly(log: Path, cause: str | None = None) -> int:
    """run.ended says stopped (and why), and a checkpoint lets the same command resume after
    the last trained batch; returns that batch."""
    ended = [e for e in run_events(log) if e.kind == "run.ended"]
    assert [e.status for e in ended] == ["stopped"], ended
    if cause is not None:
        assert cause in ended[0].message, ended[0].message
    last = json.loads((log / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert last["batch"] == ended[0].step
    return ended[0].step
