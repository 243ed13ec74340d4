"""A gateway's bad minutes, with real processes, on the Miles gateway's contract (the engine's
``--contract miles-next``: serving only its latest weights): the whole recipe against an engine
that starts slowly (healthz 503), freezes mid-batch (SIGSTOP) and loses a share of its training
results (HTTP 410); and the SDK the Miles gateway v1 refuses, refused before anything starts."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tbconsole.proxy import read_capture

from tests_support.engine import start_engine
from tests_support.runlog import run_events
from tests_support.web import free_port

pytestmark = pytest.mark.e2e

TWO_STEPS = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
    "config.kl_penalty_coef=0",
    "config.max_steps=2",
]
# A seed whose draws expire a forward_backward and an optim_step result of this run's calls (the
# draws follow the order the results complete in, which the loop fixes).
FAULT_SEED = "3"


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _tbconsole(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tbconsole", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )


def _wait_until(log: Path, found, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not any(found(e) for e in run_events(log)):
        assert proc.poll() is None, f"the run ended before {what}: {proc.stdout.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.2)


def _status(port: int) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status", timeout=10) as answer:
        return json.loads(answer.read())


@pytest.mark.root
@pytest.mark.slow
def test_a_two_step_run_rides_out_a_slow_start_a_freeze_and_lost_results_on_the_miles_contract(tmp_path):
    port, log = free_port(), tmp_path / "run"
    engine = start_engine(port, tmp_path / "engine", "--contract", "miles-next", "--starting-seconds", "15",
                     "--expire-futures", "0.1", "--fault-seed", FAULT_SEED)  # fmt: skip
    run = None
    try:
        run = _tbconsole(
            "demo", "--headless", f"config.base_url=http://127.0.0.1:{port}", f"config.log_path={log}",
            "gateway.latest_weights_only=true", *TWO_STEPS, env=_env(TINKER_API_KEY="tml-local"),
        )  # fmt: skip
        # Mid-batch (the group's trials are starting: none can end without a model call), the
        # gateway freezes (the port accepts, nothing answers) until the run has called it down
        # and cancelled the group to run it again.
        _wait_until(log, lambda e: e.kind == "group.started", run, "a group started")
        engine.send_signal(signal.SIGSTOP)
        try:
            _wait_until(log, lambda e: e.kind == "log" and "runs again once the gateway answers" in e.message,
                        run, "the outage noticed")  # fmt: skip
        finally:
            engine.send_signal(signal.SIGCONT)
        out, _ = run.communicate(timeout=600)
        faults = _status(port).get("faults", {})
    finally:
        for proc in (engine, run):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode == 0, out[-3000:]
    events = run_events(log)
    started = next(i for i, e in enumerate(events) if e.kind == "run.started")
    # Starting is not dead: waited for, then the run went on.
    assert any(e.kind == "gateway.health" and e.starting for e in events[:started]), "no starting probe"
    assert any(e.kind == "log" and "is ready after" in e.message for e in events[:started])
    # The outage: the group's trials cancelled unscored, the group run again by itself.
    assert [e for e in events if e.kind in ("decision.made", "error.raised")] == []
    assert any(e.kind == "log" and "answers again after" in e.message for e in events)
    ended = {e.trial: e for e in events if e.kind == "trial.ended"}
    scored = sorted(t for t, e in ended.items() if e.scored)
    assert len(scored) == 4 and len({re.sub(r"-r\d+$", "", t) for t in scored}) == 4, scored  # one attempt each
    assert any(t.endswith("-r1") for t in scored), "the cancelled attempt's group did not run again"
    assert all(not e.scored for t, e in ended.items() if t not in scored)
    # Both steps trained; lost results were said, never sent again.
    metrics = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "progress/batch" in m] == [0, 1]
    # Step 0 trained on exactly the fresh attempt's captures; the cancelled one's are left apart.
    step_dir = log / "capture" / "step_000000"
    assert sorted(p.name for p in step_dir.iterdir()) == ["group_000", "group_000-r1"]
    fresh = [t for p in sorted((step_dir / "group_000-r1").glob("*.jsonl")) for t in read_capture(p)]
    assert sum(len(t.output_tokens) for t in fresh) == metrics[0]["env/all/total_ac_tokens"] > 0
    lost = [e.message for e in events if e.kind == "log" and "expired the result of" in e.message]
    assert faults.get("expired_futures", 0) >= 1 and len(lost) >= 1, (faults, lost)
    assert any("forward_backward" in m or "optim_step" in m for m in lost), lost
    # No update applied twice: the final training state's optimizer took exactly two steps.
    (final,) = (tmp_path / "engine").glob("runs/*/weights/final/optimizer.pt")
    state = torch.load(final, weights_only=False)
    steps = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    assert state["steps"] == 2 and steps == {2}, (state["steps"], steps)
    # A gateway serving only its latest weights: no named sampler was ever asked for.
    saved = [e for e in events if e.kind == "checkpoint.saved"]
    assert saved and all(e.sampler_path is None and e.state_path for e in saved)


def test_the_sdk_the_miles_gateway_refuses_stops_the_run_before_anything_starts(tmp_path):
    port = free_port()
    engine = start_engine(port, tmp_path / "engine", "--contract", "miles")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tbconsole", "demo", "--headless", f"config.base_url=http://127.0.0.1:{port}",
             f"config.log_path={tmp_path / 'run'}", *TWO_STEPS],
            capture_output=True, text=True, env=_env(TINKER_API_KEY="tml-local"), timeout=120,
        )  # fmt: skip
    finally:
        engine.kill()
        engine.wait()
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "unsupported tinker SDK version" in said and "docs/gateways.md" in said, said
    assert "Traceback" not in said and not (tmp_path / "run" / "events.jsonl").exists()
