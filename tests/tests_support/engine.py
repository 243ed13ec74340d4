"""The local engine as a process of its own (`python -m tbconsole engine`), for tests that kill,
freeze or restart the gateway under a real run."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ENGINE_MODEL = "tbconsole/qwen3-tiny-agent"  # the demo's policy: a demo run can train against it


def start_engine(port: int, data_dir: Path, *flags: str, model: str = ENGINE_MODEL) -> subprocess.Popen:
    """The engine on ``port`` (``flags``: --contract, --starting-seconds, ...), returned once its
    port accepts. Its output is dropped: a pipe nobody reads would stall it once full."""
    env = {k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tbconsole", "engine", "--port", str(port), "--model", model,
         "--data-dir", str(data_dir), *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    wait_for_port(port, proc)
    return proc


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Returns once 127.0.0.1:``port`` accepts; fails if ``proc`` (the server) exits first."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None, f"the server for port {port} exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"nothing listened on port {port} within {timeout} s"
        time.sleep(0.2)
