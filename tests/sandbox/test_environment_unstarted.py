"""A sandbox that never started: Harbor still asks it for logs after a failed start."""

import pytest
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

from tbconsole.sandbox.environment import LocalSandbox
from tbconsole.sandbox.spec import SandboxError


def _unstarted(tmp_path):
    env_dir = tmp_path / "environment"
    env_dir.mkdir()
    paths = TrialPaths(tmp_path / "trial")
    paths.mkdir()
    return LocalSandbox(
        environment_dir=env_dir,
        environment_name="unstarted",
        session_id="unstarted",
        trial_paths=paths,
        task_env_config=EnvironmentConfig(),
    )


async def test_downloads_from_a_sandbox_that_never_started_fetch_nothing_quietly(tmp_path):
    env = _unstarted(tmp_path)
    target = tmp_path / "logs"
    await env.download_dir("/logs/agent", target)
    await env.download_file("/logs/agent/out.txt", target / "out.txt")
    assert not target.exists()


async def test_commands_in_a_sandbox_that_never_started_still_fail_loudly(tmp_path):
    env = _unstarted(tmp_path)
    with pytest.raises(SandboxError, match="not running"):
        await env.exec("true")
    with pytest.raises(SandboxError, match="not running"):
        await env.upload_file(tmp_path / "environment", "/app/x")
