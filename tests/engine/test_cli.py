"""`tbconsole engine` as a process: serves on loopback, answers healthz, lists its model (a run that
names another is refused before it starts), stops on SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR

pytestmark = pytest.mark.e2e

SCRIPT = """
import argparse, sys
from tbconsole.engine import cli
p = argparse.ArgumentParser()
cli.add_arguments(p)
sys.exit(cli.run(p.parse_args(sys.argv[1:])))
"""


def test_cli_serves_and_stops(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TINKER_TELEMETRY": "0", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, "--port", "0", "--data-dir", str(tmp_path), "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if "serving http://" in line:
                url = line.rsplit("serving ", 1)[1].strip()
        assert url and url.startswith("http://127.0.0.1:"), url
        assert httpx.get(f"{url}/api/v1/healthz").json() == {"status": "ok"}
        caps = httpx.get(f"{url}/api/v1/get_server_capabilities").json()
        assert caps["supported_models"][0]["model_name"] == "tbconsole/qwen3-tiny"
        # A run naming a model this engine does not serve is refused before it starts, by name (a
        # usage error: exit 2).
        (tmp_path / "trial.json").write_text('{"agent": {"name": "nop"}}')
        run = subprocess.run(
            [sys.executable, "-m", "tbconsole", "train", f"config.base_url={url}", "config.model_name=Qwen/Qwen3-8B",
             f"config.log_path={tmp_path / 'run'}", f"config.dataset_builder.tasks_dir={BUNDLED_TASKS_DIR}",
             "config.learning_rate=1e-4", "config.max_tokens=64", f"harbor.trial_config={tmp_path / 'trial.json'}"],
            capture_output=True, text=True, env={**env, "TINKER_API_KEY": "tml-local"}, timeout=300,
        )  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert "config.model_name=Qwen/Qwen3-8B is not served" in run.stderr, run.stderr
        assert "it serves tbconsole/qwen3-tiny" in run.stderr and "Traceback" not in run.stderr
        assert not (tmp_path / "run").exists()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
