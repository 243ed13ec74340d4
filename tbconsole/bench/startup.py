"""`tbconsole bench startup`: how long the command line takes to answer, each as a ratio to a bare
interpreter start measured in the same run.

Cases, each a fresh process, run in turn (round-robin, so that a burst of load touches all):
``python -c pass`` (the baseline); ``tbconsole --help``; ``tbconsole train`` missing a required
option (a usage error, exit 2); ``tbconsole train`` with good options and a closed loopback port as
``config.base_url`` (a dead gateway, exit 1). Offline and loopback only: nothing is started, and a
case that does not exit as expected fails the benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR

CASE_TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=10, help="runs of each case (default 10)")


def cases(folder: Path, dead_port: int) -> list[tuple[str, list[str], int]]:
    """(name, argv, the exit status it must end with)."""
    trial = folder / "trial.json"
    trial.write_text(json.dumps({"agent": {"name": "nop"}}))
    tbconsole = [sys.executable, "-m", "tbconsole"]
    train = [
        *tbconsole,
        "train",
        f"config.base_url=http://127.0.0.1:{dead_port}",
        "config.model_name=tbconsole/qwen3-tiny",
        "config.max_tokens=64",
        f"config.log_path={folder / 'run'}",
        f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}",
        f"harbor.trial_config={trial}",
    ]
    return [
        ("python -c pass", [sys.executable, "-c", "pass"], 0),
        ("tbconsole --help", [*tbconsole, "--help"], 0),
        ("usage error", train, 2),  # config.learning_rate is missing
        ("dead gateway", [*train, "config.learning_rate=1e-4"], 1),
    ]


def time_once(argv: list[str], expected: int, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=CASE_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if done.returncode != expected:
        raise RuntimeError(f"{' '.join(argv[:4])} … exited {done.returncode}, not {expected}: {done.stderr[-500:]}")
    return elapsed


def measure(runs: int) -> dict[str, list[float]]:
    env = {**os.environ, "TINKER_API_KEY": "tml-bench", "HF_HUB_OFFLINE": "1", "TINKER_TELEMETRY": "0"}
    with tempfile.TemporaryDirectory(prefix="tbconsole-bench-startup-") as tmp, socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused at once
        env["TMPDIR"] = tmp  # what the commands leave is removed with it
        plan = cases(Path(tmp), closed.getsockname()[1])
        times: dict[str, list[float]] = {name: [] for name, _, _ in plan}
        for _ in range(runs):
            for name, argv, expected in plan:
                times[name].append(time_once(argv, expected, env))
    return times


def run(args: argparse.Namespace) -> int:
    if args.runs < 1:
        print("tbconsole bench startup: --runs takes 1 or more", file=sys.stderr)
        return 2
    try:
        times = measure(args.runs)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"tbconsole bench startup: {exc}", file=sys.stderr)
        return 1
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"python {platform.python_version()}, load {os.getloadavg()[0]:.1f}; {args.runs} runs each"
    )
    baseline = statistics.median(times["python -c pass"])
    print(f"{'case':<18}{'median':>10}{'min':>10}{'max':>10}   ratio (median / python -c pass)")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(
            f"{name:<18}{median * 1e3:>7.0f} ms{min(samples) * 1e3:>7.0f} ms{max(samples) * 1e3:>7.0f} ms"
            f"   {median / baseline:6.1f}x"
        )
    return 0
