"""The recipe's promises under real faults, with real processes: the engine killed mid-batch,
the run killed with SIGKILL and resumed, tasks that cannot run here, no key, a dead gateway."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR
from tbconsole.proxy import read_capture

from tests_support.diskfill import fill_disk
from tests_support.engine import start_engine
from tests_support.healthz import healthz_server
from tests_support.runlog import run_events
from tests_support.web import free_port

pytestmark = pytest.mark.e2e

SMALL = [
    "config.dataset_builder.groups_per_batch=1",
    "config.dataset_builder.group_size=2",
    "config.max_tokens=64",
    "config.eval_every=0",
    "config.kl_penalty_coef=0",  # no reference model to load and score against: KL is not under test here
    "config.max_steps=1",
]


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _wait_for(log: Path, kind: str, proc: subprocess.Popen, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in run_events(log) if e.kind == kind]
        if found:
            return found[0]
        assert proc.poll() is None, f"the run ended before any {kind}"
        time.sleep(0.2)
    raise AssertionError(f"no {kind} event within {timeout} s")


def _tbconsole(*args: str, env: dict, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tbconsole", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
    )


@pytest.mark.root
@pytest.mark.slow
def test_the_engine_killed_mid_batch_scores_nothing_and_ends_the_run_with_the_reason(tmp_path):
    port = free_port()
    engine = start_engine(port, tmp_path / "engine")
    log = tmp_path / "run"
    run = None
    try:
        run = _tbconsole(
            "demo",
            "--headless",
            f"config.base_url=http://127.0.0.1:{port}",
            f"config.log_path={log}",
            "gateway.outage_limit=5",  # rides an outage out this long, then stops with the reason
            *SMALL,
            env=_env(TINKER_API_KEY="tml-local"),
        )
        _wait_for(log, "group.started", run)
        engine.send_signal(signal.SIGKILL)
        # A guard, not a measure: a run that rode the outage out for the default limit (600 s)
        # instead of the 5 s asked would still be going when it runs out.
        out, _ = run.communicate(timeout=240)
    finally:
        for proc in (engine, run):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert run.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    events = run_events(log)
    assert [e for e in events if e.kind == "trial.ended" and e.scored] == [], "a trial was scored"
    errors = [e for e in events if e.kind == "error.raised"]
    assert errors and errors[0].exception_type in ("GatewayUnavailable", "ModelCallFailed"), errors
    assert "gateway.outage_limit" in errors[0].message and not errors[0].decision_needed, errors[0]
    assert [e.decision for e in events if e.kind == "decision.made"] == []  # an outage asks nobody
    ended = [e for e in events if e.kind == "run.ended"]
    assert len(ended) == 1 and ended[0].status == "failed" and "gateway" in ended[0].message.lower()


@pytest.mark.root
@pytest.mark.slow
def test_a_step_resumed_after_kill_9_trains_on_one_attempt(tmp_path):
    """On the Miles gateway's contract (the engine's --contract miles-next: latest weights only),
    off-policy (config.async_config): the resumed run draws the groups no update trained, each
    once, and trains the step on the fresh attempt's captures only."""
    log, port = tmp_path / "run", free_port()
    engine = start_engine(port, tmp_path / "engine", "--contract", "miles-next")
    args = ("demo", "--headless", f"config.log_path={log}", f"config.base_url=http://127.0.0.1:{port}",
            "gateway.latest_weights_only=true", "config.async_config.max_steps_off_policy=1",
            "config.async_config.groups_per_batch=1", *SMALL)  # fmt: skip
    first = second = None
    try:
        first = _tbconsole(*args, env=_env(TINKER_API_KEY="tml-local"))
        deadline = time.monotonic() + 300
        while not any(e.kind == "proxy.request" and e.captured for e in run_events(log)):
            assert first.poll() is None and time.monotonic() < deadline, "no captured turn"
            time.sleep(0.2)
        first.kill()  # SIGKILL: no cleanup at all
        first.wait()
        second = _tbconsole(*args, env=_env(TINKER_API_KEY="tml-local"))
        out, _ = second.communicate(timeout=600)
    finally:
        for proc in (engine, first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert second.returncode == 0, out[-3000:]
    step_dir = log / "capture" / "step_000000"
    assert sorted(p.name for p in step_dir.iterdir()) == ["group_000", "group_000-r1"]
    for path in step_dir.rglob("*.jsonl"):
        turns = [t.turn for t in read_capture(path)]
        assert turns == list(range(len(turns))), f"{path.name} mixes attempts: {turns}"
    fresh = [t for p in sorted((step_dir / "group_000-r1").glob("*.jsonl")) for t in read_capture(p)]
    metrics = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0]
    assert sum(len(t.output_tokens) for t in fresh) == metrics[0]["env/all/total_ac_tokens"]
    events = run_events(log)
    resumed = max(i for i, e in enumerate(events) if e.kind == "run.started")
    trials = {e.trial for e in events[resumed:] if e.kind == "trial.ended"}
    assert trials and all(t.endswith("-r1") for t in trials)
    trained = [(e.step, e.group, e.update) for e in events if e.kind == "group.trained"]
    assert trained == [(0, 0, 0)]  # once, after the resume
    # The killed attempt said nothing: the resumed run drops it as abandoned, with what it cost.
    (dropped,) = [e for e in events[resumed:] if e.kind == "group.dropped"]
    assert (dropped.step, dropped.group, dropped.reason) == (0, 0, "abandoned") and dropped.sandbox_seconds > 0


def _train(tmp_path: Path, *extra: str, env: dict) -> subprocess.CompletedProcess:
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"agent": {"name": "oracle"}}))
    args = [
        "config.model_name=tbconsole/qwen3-tiny",
        "config.learning_rate=1e-4",
        "config.max_tokens=64",
        f"config.log_path={tmp_path / 'run'}",
        f"harbor.trial_config={trial}",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "tbconsole", "train", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_task_folders_that_need_container_images_are_refused_before_anything_starts(tmp_path, tb2_sample):
    with healthz_server() as base_url:
        proc = _train(
            tmp_path,
            f"config.base_url={base_url}",
            f"config.dataset_builder.tasks_dir={tb2_sample}",
            env=_env(TINKER_API_KEY="tml-test"),
        )
    assert proc.returncode == 2, proc.stderr
    assert "cannot run in the local sandbox" in proc.stderr and "tbconsole tasks" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists(), "nothing may start"


def test_a_missing_api_key_is_one_message(tmp_path):
    proc = _train(tmp_path, "config.base_url=http://127.0.0.1:9", "config.dataset_builder.tasks_dir=/x", env=_env())
    assert proc.returncode == 2
    assert "TINKER_API_KEY is not set" in proc.stderr and "Traceback" not in proc.stderr


def test_usage_errors_come_before_the_gateway_probe_then_a_dead_gateway_is_one_message(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    key = _env(TINKER_API_KEY="tml-test")
    # No scheme: what to add, before anything is probed.
    proc = _train(
        tmp_path, f"config.base_url={dead.removeprefix('http://')}", "config.dataset_builder.tasks_dir=/x", env=key
    )
    assert proc.returncode == 2, proc.stderr
    assert f"add http:// (config.base_url={dead})" in proc.stderr and "not answering" not in proc.stderr
    # A misspelt key on a dead gateway: the key is what the user hears about first.
    proc = _train(
        tmp_path, f"config.base_url={dead}", "config.dataset_builder.tasks_dir=/x", "config.lerning_rate=1", env=key
    )
    assert proc.returncode == 2, proc.stderr
    assert "lerning_rate" in proc.stderr and "not answering" not in proc.stderr and "Traceback" not in proc.stderr
    # A missing task folder is a usage error too, said before the gateway.
    proc = _train(tmp_path, f"config.base_url={dead}", "config.dataset_builder.tasks_dir=/x", env=key)
    assert proc.returncode == 2 and "/x" in proc.stderr and "not answering" not in proc.stderr, proc.stderr
    # The options are good: the dead gateway, in one message.
    proc = _train(tmp_path, f"config.base_url={dead}", f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}", env=key)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("tbconsole train: ") and len(proc.stderr.strip().splitlines()) == 1
    assert "is not answering" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.root
def test_a_full_disk_at_start_is_refused_with_what_is_free_and_needed(tmp_path, tmpfs):
    disk = tmpfs("2m")
    proc = subprocess.run(
        [sys.executable, "-m", "tbconsole", "demo", "--headless", f"config.log_path={disk / 'run'}", *SMALL],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.returncode == 2, proc.stderr
    assert "not enough disk space" in proc.stderr and "free" in proc.stderr and "needed" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (disk / "run").exists() or not any((disk / "run").iterdir())


@pytest.mark.root
@pytest.mark.slow
def test_a_disk_that_fills_mid_run_stops_it_with_one_message_and_whole_events(tmp_path, tmpfs):
    disk = tmpfs("700m")
    log = disk / "run"
    run = _tbconsole("demo", "--headless", f"config.log_path={log}", *SMALL, env=_env())
    try:
        _wait_for(log, "group.started", run)
        fill_disk(disk)
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "Traceback" not in out and "ExceptionGroup" not in out, out[-3000:]
    assert run.returncode == 1, out[-3000:]
    lines = (log / "events.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines), "only whole lines"
    assert json.loads(lines[-1])["kind"] == "run.ended"
    states = [e.state for e in run_events(log) if e.kind == "control.changed"]
    # Which write meets the full disk first is a race: the event log's (one message, then a clean
    # stop) or a trial's (an infrastructure failure: not scored, the run ends failed naming it).
    if "cannot write" in out:
        assert out.count("cannot write") == 1, out[-3000:]
        assert "stopping" in states, states
    else:
        ended = [e for e in run_events(log) if e.kind == "trial.ended"]
        assert ended and not any(e.scored for e in ended), ended
        assert "No space left on device" in json.loads(lines[-1])["message"], lines[-1]
