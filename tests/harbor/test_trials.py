"""Real Harbor trials in the local sandbox: the bundled tasks, cancellation, the CLI."""

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tbconsole.enums import TrialOutcome
from tbconsole.taskset import BUNDLED_TASKS_DIR, discover, load
from tbconsole.trial import build_trial_config, run_trial

from tests_support import pids_with

pytestmark = pytest.mark.root

BUNDLED = discover(BUNDLED_TASKS_DIR)


def _config(task_dir: Path, agent: str, trials_dir: Path, sandbox_root: Path):
    return build_trial_config(
        task_dir,
        agent=agent,
        trials_dir=trials_dir,
        trial_config={
            "environment": {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"root": str(sandbox_root)}}
        },
    )


def test_bundled_set_is_large_and_graded():
    infos = [load(p) for p in BUNDLED]
    assert len(infos) >= 12
    difficulties = {i.difficulty for i in infos}
    assert {"easy", "medium", "hard"} <= difficulties
    for info in infos:
        assert info.runs_locally and info.has_solution, info.name
        assert info.docker_image is None and not info.has_dockerfile, info.name


@pytest.mark.parametrize("task_dir", BUNDLED, ids=[p.name for p in BUNDLED])
async def test_oracle_scores_one_and_nop_scores_zero(task_dir, tmp_path, sandbox_root):
    oracle = await run_trial(_config(task_dir, "oracle", tmp_path, sandbox_root))
    assert oracle.exception is None, oracle.exception
    assert oracle.reward == 1.0, (task_dir / "tests").name + ": " + _verifier_output(oracle.trial_dir)
    nop = await run_trial(_config(task_dir, "nop", tmp_path, sandbox_root))
    assert nop.exception is None, nop.exception
    assert nop.reward == 0.0, _verifier_output(nop.trial_dir)


def _verifier_output(trial_dir: Path) -> str:
    out = trial_dir / "verifier" / "test-stdout.txt"
    return out.read_text()[-2000:] if out.exists() else "(no verifier output)"


def _slow_task(root: Path) -> Path:
    task = root / "slow-task"
    (task / "solution").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("Wait.\n")
    (task / "task.toml").write_text(
        textwrap.dedent("""
        schema_version = "1.1"
        [agent]
        timeout_sec = 120.0
        [verifier]
        timeout_sec = 30.0
        [environment]
        workdir = "/app"
    """)
    )
    (task / "environment" / "setup.sh").write_text("echo prepared > /app/state\n")
    (task / "solution" / "solve.sh").write_text(
        "tmux new-session -d 'sleep 7451'\nsleep 7452 >/dev/null 2>&1 &\nsleep 7453\n"
    )
    (task / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    return task


async def test_cancelled_trial_leaves_no_process_mount_or_folder(tmp_path, sandbox_root):
    task = _slow_task(tmp_path)
    config = _config(task, "oracle", tmp_path / "trials", sandbox_root)
    running = asyncio.create_task(run_trial(config))
    for _ in range(300):
        if pids_with("sleep 7453"):
            break
        await asyncio.sleep(0.05)
    assert pids_with("sleep 7451") and pids_with("sleep 7452") and pids_with("sleep 7453")
    assert any(sandbox_root.iterdir())
    running.cancel()
    try:
        await running
    except asyncio.CancelledError:
        pass
    # run_trial returns only once the sandbox is gone, also when cancelled: nothing to wait for.
    assert pids_with("sleep 745") == []
    assert "overlay" not in Path("/proc/self/mountinfo").read_text()
    # the sandbox_root fixture asserts no folder is left; Harbor recorded the cancellation:
    result = json.loads(next((tmp_path / "trials").glob("*/result.json")).read_text())
    assert result["exception_info"]["exception_type"] == "CancelledError"


async def test_a_trial_is_judged_by_the_training_rule(tmp_path, sandbox_root):
    """No reward from the verifier: training would not score it, so neither does the smoke test."""
    task = _slow_task(tmp_path)
    (task / "solution" / "solve.sh").write_text("true\n")
    (task / "tests" / "test.sh").write_text("true  # writes no reward\n")
    summary = await run_trial(_config(task, "oracle", tmp_path / "trials", sandbox_root))
    assert summary.outcome.status == TrialOutcome.AGENT_ERROR and not summary.ok
    assert summary.reward is None and "RewardFileNotFoundError" in summary.exception
    assert "outcome   AgentError" in summary.lines()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tbconsole", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_cli_trial_prints_reward_one_for_the_oracle(tmp_path):
    proc = _cli("trial", str(BUNDLED_TASKS_DIR / "hello-file"), "--trials-dir", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line and line[0].isalpha() and " " in line)
    assert lines["reward"].strip() == "1"
    assert lines["outcome"].strip() == TrialOutcome.SUBMITTED
    assert "verifier" in lines["timings"]
    trial_dir = Path(proc.stdout.split("trial dir", 1)[1].strip())
    assert (trial_dir / "result.json").is_file()


def test_cli_trial_with_a_trial_config_and_nop_agent(tmp_path):
    config = tmp_path / "trial.json"
    config.write_text(json.dumps({"trials_dir": str(tmp_path / "t"), "agent": {"name": "nop"}}))
    proc = _cli("trial", str(BUNDLED_TASKS_DIR / "hello-file"), "--trial-config", str(config), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "reward    0" in proc.stdout
    assert list((tmp_path / "t").iterdir())


@pytest.mark.parametrize(
    "args, message",
    [
        (["trial", "/no/such/task"], "not a Harbor task folder"),
        (["trial", str(BUNDLED_TASKS_DIR / "hello-file"), "--trial-config", "/no/such.json"], "does not exist"),
        (["trial", str(BUNDLED_TASKS_DIR / "hello-file"), "--bogus"], "unrecognized arguments"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path, args, message):
    proc = _cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_trial_config_problems_are_usage_errors(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    placeholder = tmp_path / "placeholder.json"
    placeholder.write_text(json.dumps({"agent": {"name": "nop", "env": {"OPENAI_BASE_URL": "{proxy_url}/v1"}}}))
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({"agent": {"name": "nop"}, "timeout_multiplier": "fast"}))
    task = str(BUNDLED_TASKS_DIR / "hello-file")
    for path, message in ((bad_json, "not valid JSON"), (placeholder, "{proxy_url}"), (invalid, "timeout_multiplier")):
        proc = _cli("trial", task, "--trial-config", str(path), cwd=tmp_path)
        assert proc.returncode == 2, (path.name, proc.stderr)
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_cli_refuses_image_tasks_with_a_clear_message(tb2_sample, tmp_path):
    # A real TB2 task needs its Docker image: the local sandbox says so instead of failing late.
    task = tmp_path / "fix-git"
    subprocess.run(["cp", "-r", str(tb2_sample / "fix-git"), str(task)], check=True)
    (task / "tests" / "test.sh").write_text("exit 0\n")
    proc = _cli("trial", str(task), "--trials-dir", str(tmp_path / "t"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "needs the image alexgshaw/fix-git" in proc.stderr
    assert "Traceback" not in proc.stderr
