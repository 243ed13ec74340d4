"""Real Harbor trials in the local sandbox: the bundled tasks, cancellation, the CLI."""

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tbconsole.harbor.taskset import BUNDLED_TASKS_DIR, discover, load
from tbconsole.record.enums import TrialOutcome
from tbconsole.runner.single_trial import build_trial_config, run_trial
from tbconsole.ui.data.trialfiles import load_trial_files

from tests_support.processes import pids_with

pytestmark = [pytest.mark.e2e, pytest.mark.root]

BUNDLED = discover(BUNDLED_TASKS_DIR)


def _config(task_dir: Path, agent: str, trials_dir: Path, sandbox_root: Path, **kwargs):
    return build_trial_config(
        task_dir,
        agent=agent,
        trials_dir=trials_dir,
        trial_config={
            "environment": {
                "import_path": "tbconsole.sandbox:LocalSandbox",
                "kwargs": {"root": str(sandbox_root), **kwargs},
            }
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


async def test_the_agent_log_is_in_the_trial_folder_while_the_agent_runs(tmp_path, sandbox_root):
    """The trial folder's agent/ is bound inside: the line the agent logs before it blocks is on
    the host while it still runs. What the trial leaves is what copying out after it left."""
    gate = tmp_path / "gate"  # shown read-only inside: the agent waits for the test to open it
    gate.mkdir()
    task = _slow_task(tmp_path)
    (task / "solution" / "solve.sh").write_text(
        # A log written by another user, and a FIFO no one writes to: the trial folder ends up
        # with what a copy would have made of them (owned by the runner's user; no FIFO), and
        # the console reads past the FIFO while the agent runs.
        "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo mine > /logs/agent/nobody.txt'\n"
        "mkfifo /logs/agent/pipe.txt\n"
        f"echo 'agent started'\nuntil [ -e {gate}/open ]; do sleep 0.05; done\n"
        "echo solved > /app/answer\necho 'agent done'\n"
    )
    (task / "tests" / "test.sh").write_text(
        "echo \"answer: $(cat /app/answer)\"\necho 'to stderr' >&2\necho 1 > /logs/verifier/reward.txt\n"
    )
    live_dir = tmp_path / "live"
    running = asyncio.create_task(run_trial(_config(task, "oracle", live_dir, sandbox_root, host_paths=[str(gate)])))
    seen = ""
    for _ in range(2400):  # until the line shows (or the trial ends without it: then it fails below)
        log = next(live_dir.glob("*/agent/oracle.txt"), None)
        seen = log.read_text() if log is not None else ""
        if "agent started" in seen or running.done():
            break
        await asyncio.sleep(0.05)
    assert seen == "agent started\n" and not running.done()
    console = load_trial_files(log.parent.parent)  # what the transcript screen shows meanwhile
    assert ("agent/oracle.txt", "agent started\n") in console.agent_logs
    assert ("agent/nobody.txt", "mine\n") in console.agent_logs
    (gate / "open").touch()
    live = await running

    copied_dir = tmp_path / "copied"  # the same trial with the folders copied out afterwards
    copied = await run_trial(
        _config(task, "oracle", copied_dir, sandbox_root, host_paths=[str(gate)], auto_mounting=False)
    )
    for summary in (live, copied):
        assert summary.exception is None, summary.exception
        assert summary.reward == 1.0 and summary.outcome.status == TrialOutcome.SUBMITTED
    assert _left(live.trial_dir) == _left(copied.trial_dir)
    assert (live.trial_dir / "agent" / "oracle.txt").read_text() == "agent started\nagent done\n"
    assert sorted(p.name for p in (live.trial_dir / "agent").iterdir()) == ["nobody.txt", "oracle.txt"]
    assert (live.trial_dir / "verifier" / "test-stdout.txt").read_text() == "answer: solved\nto stderr\n"


def _left(trial_dir: Path) -> dict:
    """What a trial left that does not differ by run: its agent, verifier and artifacts files, who
    owns them, the verifier's result. Not the artifacts manifest: Harbor records an empty bound
    artifacts folder as "empty" where it records a copied one as "ok"."""
    result = json.loads((trial_dir / "result.json").read_text())
    files = {
        str(p.relative_to(trial_dir)): (p.read_bytes() if p.is_file() else None, p.stat().st_uid, p.stat().st_gid)
        for p in sorted(trial_dir.rglob("*"))
        if p.parts[len(trial_dir.parts)] in ("agent", "verifier", "artifacts") and p.name != "manifest.json"
    }
    return {"files": files, "verifier_result": result["verifier_result"], "exception": result["exception_info"]}


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
