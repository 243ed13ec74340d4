"""The whole recipe offline: `tbconsole demo` on the embedded default (local engine, generated
task variants, local sandbox, real mini-swe-agent through the capture proxy, the cookbook's loop)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbconsole.proxy import read_capture

from tests_support.processes import sandbox_cgroups_of
from tests_support.runlog import run_events

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

SMALL = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
    "config.kl_penalty_coef=0",  # no reference model to load and score against: KL is not under test here
]


def _demo(log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tbconsole", "demo", f"config.log_path={log}", *SMALL, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _wait_for(log: Path, kind: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.kind == kind for e in run_events(log)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no {kind} event within {timeout} s")


def _wait_for_state(log: Path, state: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.kind == "control.changed" and e.state == state for e in run_events(log)):
            return
        time.sleep(0.2)
    raise AssertionError(f"the run never reached {state} within {timeout} s")


def test_demo_one_step_trains_on_exactly_what_was_captured(tmp_path):
    log = tmp_path / "run"
    proc = _demo(log, "config.max_steps=1")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    rows = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    for key in (
        "env/all/reward/total",
        "optim/kl_sample_train_v1",
        "optim/entropy",
        "optim/lr",
        "env/all/total_ac_tokens",
        "env/all/by_group/frac_mixed",
        "progress/batch",
    ):
        assert key in rows[0], key
    assert abs(rows[0]["optim/kl_sample_train_v1"]) < 1e-3  # captured logprobs match the trainer's
    assert [json.loads(line)["batch"] for line in (log / "checkpoints.jsonl").read_text().splitlines()][-1] == 1
    captured = [t for f in sorted((log / "capture").rglob("*.jsonl")) for t in read_capture(f)]
    assert captured, "the agent's model calls were captured"
    assert sum(len(t.output_tokens) for t in captured) == rows[0]["env/all/total_ac_tokens"]
    assert sum(len(t.prompt_tokens) for t in captured) == rows[0]["env/all/total_ob_tokens"]
    # The embedded engine (hosted Tinker's contract) samples older weights: the run's question to
    # it (gateway.latest_weights_only unset) found nothing to change.
    assert not [e for e in run_events(log) if e.kind == "log" and "serves only its latest weights" in e.message]
    kinds = [e.kind for e in run_events(log)]
    for kind in (
        "run.started",
        "gateway.health",
        "group.started",
        "trial.phase",
        "proxy.request",
        "trial.ended",
        "group.ended",
        "step.metrics",
        "run.ended",
    ):
        assert kind in kinds, kind
    ended = [e for e in run_events(log) if e.kind == "run.ended"][-1]
    assert ended.status == "done"
    assert "tml-local" not in (log / "events.jsonl").read_text()


def test_abort_keeps_captures_and_events(tmp_path):
    from tbconsole.sandbox.namespace import DEFAULT_ROOT

    before = set(DEFAULT_ROOT.iterdir()) if DEFAULT_ROOT.exists() else set()
    log = tmp_path / "run"
    proc = _demo(log, "config.max_steps=1")
    _wait_for(log, "proxy.request")
    proc.send_signal(signal.SIGINT)  # first Ctrl-C: stop after the batch
    _wait_for_state(log, "stopping")  # the runner has taken it (else the second would be the first)
    proc.send_signal(signal.SIGINT)  # second: abort now
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]
    events = run_events(log)
    assert [e.status for e in events if e.kind == "run.ended"] == ["aborted"]
    requests = [e for e in events if e.kind == "proxy.request" and e.captured]
    captured = [t for f in (log / "capture").rglob("*.jsonl") for t in read_capture(f)]
    assert requests and len(captured) >= len(requests)
    assert not (log / "metrics.jsonl").exists() or not (log / "metrics.jsonl").read_text().strip()
    # A double Ctrl-C leaves no sandbox behind: no folder, no cgroup.
    assert set(DEFAULT_ROOT.iterdir()) - before == set()
    assert sandbox_cgroups_of(proc.pid) == []
