"""Nothing hangs: the recipe's runner, run again and again on batches whose trials all fail at
once (at different moments: at the verifier, mid-agent, with a sibling group still starting;
every third run streaming minibatches and every third off-policy, whose groups nobody awaits),
returns with nothing left behind: no task on its event loop (what kept a process alive after
run.ended), no sandbox folder and no sandbox process. Then the same as real processes, each
of which must exit within seconds of its run.ended."""

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tbconsole.record.control import RunControl
from tbconsole.record.events import EventBus, read_events
from tbconsole.runner import train
from tbconsole.runner.options import parse

from tests_support.processes import pids_with, sandbox_cgroups_of
from tests_support.trials import make_task

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

# CI's size; the full stress (50 runs, about 6 minutes) with TBCONSOLE_STRESS_ITERATIONS=50.
ITERATIONS = int(os.environ.get("TBCONSOLE_STRESS_ITERATIONS", "12"))


def failing_tasks(root: Path, rng: random.Random) -> Path:
    """Two tasks whose trials all raise (no reward), one of them only after a while, so the
    other group's failure lands while its trials are still in their agent or sandbox start."""
    tasks = root / "tasks"
    fast = rng.choice([0, 0.2, 1])
    slow = rng.choice([2, 5, 30])
    for name, sleep in (("a-fast", fast), ("b-slow", slow)):
        task = make_task(tasks, name, solve=f"sleep {sleep}\n", test="true  # no reward\n")
        toml = task / "task.toml"  # limits give each sandbox its cgroups, which must go too
        toml.write_text(toml.read_text().replace('workdir = "/app"', 'workdir = "/app"\ncpus = 1\nmemory_mb = 512'))
    return tasks


def recipe_args(root: Path, tasks: Path, sandbox_root: Path, base_url: str) -> list[str]:
    trial = root / "trial.json"
    trial.write_text(
        json.dumps(
            {
                "agent": {"name": "oracle"},
                "environment": {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"root": str(sandbox_root)}},
            }
        )
    )
    return [
        f"config.base_url={base_url}",
        "config.model_name=tbconsole/qwen3-tiny",
        "config.learning_rate=1e-4",
        "config.max_tokens=16",
        f"config.log_path={root / 'run'}",
        f"config.dataset_builder.tasks_dir={tasks}",
        "config.dataset_builder.groups_per_batch=2",
        "config.dataset_builder.group_size=2",
        "config.max_steps=1",
        f"harbor.trial_config={trial}",
    ]


async def test_runs_whose_trials_all_fail_return_with_nothing_left(tmp_path, sandbox_root, monkeypatch):
    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.registry import register_with_cookbook

    register_with_cookbook()
    rng = random.Random(11)
    slowest = 0.0
    with EmbeddedEngine(data_dir=str(tmp_path / "engine"), model="tbconsole/qwen3-tiny") as engine:
        monkeypatch.setenv("TINKER_API_KEY", engine.api_key)
        for i in range(ITERATIONS):
            root = tmp_path / f"r{i}"
            args = recipe_args(root, failing_tasks(root, rng), sandbox_root, engine.base_url)
            if i % 3 == 1:  # streaming minibatches: the cookbook runs each group in a task nobody awaits
                args += ["config.stream_minibatch_config.groups_per_batch=2",
                         "config.stream_minibatch_config.num_minibatches=2"]  # fmt: skip
            elif i % 3 == 2:  # off-policy: workers, a trainer and a data loader, none awaited by the run
                args += ["config.async_config.max_steps_off_policy=1", "config.async_config.groups_per_batch=2"]
            parsed = parse(args)
            bus = EventBus(root / "run")
            started = time.monotonic()
            result = await asyncio.wait_for(train.main(parsed, bus, RunControl(bus.publish)), 120)
            slowest = max(slowest, time.monotonic() - started)
            bus.close()
            assert result.status == "failed" and "RewardFileNotFoundError" in result.message, (i, result)
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            assert others == [], f"iteration {i}: tasks left running after the run ended: {others}"
            assert not any(sandbox_root.iterdir()), f"iteration {i}: sandbox folders left"
            assert pids_with(str(sandbox_root)) == [], f"iteration {i}: sandbox processes left"
            assert sandbox_cgroups_of(os.getpid()) == [], f"iteration {i}: sandbox cgroups left"
            ended = [e for e in read_events(root / "run" / "events.jsonl") if e.kind == "run.ended"]
            assert [e.status for e in ended] == ["failed"]
    print(f"{ITERATIONS} failing runs, slowest {slowest:.1f} s")


def test_a_process_whose_trials_all_fail_exits_right_after_run_ended(tmp_path, sandbox_root):
    rng = random.Random(5)
    engine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "engine",
            "--port",
            "0",
            "--model",
            "tbconsole/qwen3-tiny",
            "--data-dir",
            str(tmp_path / "engine"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base_url = _engine_url(engine)
        for i in range(2):
            root = tmp_path / f"p{i}"
            args = recipe_args(root, failing_tasks(root, rng), sandbox_root, base_url)
            proc = subprocess.Popen(
                [sys.executable, "-m", "tbconsole", "train", "--headless", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "TINKER_API_KEY": "tml-local"},
            )
            out, _ = proc.communicate(timeout=300)
            exited = time.time()
            assert proc.returncode == 1, out[-2000:]
            assert "Traceback" not in out
            ended = [e for e in read_events(root / "run" / "events.jsonl") if e.kind == "run.ended"]
            assert len(ended) == 1 and exited - ended[0].ts < 10, f"exited {exited - ended[0].ts:.1f} s after run.ended"
            assert not any(sandbox_root.iterdir())
            assert sandbox_cgroups_of(proc.pid) == []
    finally:
        engine.kill()
        engine.wait()


def _engine_url(engine: subprocess.Popen, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    for line in engine.stdout:
        if "http://" in line:
            return "http://" + line.split("http://", 1)[1].split()[0].rstrip("/.,")
        assert time.monotonic() < deadline
    raise AssertionError("the engine printed no URL")
