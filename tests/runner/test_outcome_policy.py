"""The outcome policy on real Harbor trials, with faults injected into tasks, environments and
the capture path: what is scored, what raises, and that a raise cancels the group."""

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tbconsole.record.enums import ControlState, TrialOutcome
from tbconsole.runner.outcomes import TrialFailed
from tbconsole.runner.rollout import HarborRolloutStrategy, run_group
from tbconsole.sandbox.namespace import BASE_PATH

from tests_support.processes import pids_with
from tests_support.trials import context, ended, group, make_task
from tests_support.waiting import wait_until_async

pytestmark = [pytest.mark.e2e, pytest.mark.root]


async def test_completed_and_timed_out_trials_are_scored(tmp_path, sandbox_root):
    ok = make_task(
        tmp_path,
        "ok",
        solve="echo done > /app/out\n",
        test=("grep -q done /app/out && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"),
    )
    ctx, seen = context(tmp_path, sandbox_root)
    result = await run_group(ctx, builder := group(ok), sampling_client=None)
    assert [r.reward for r in builder.rewards] == [1.0, 1.0]
    assert len(result.trajectories) == 2 and all(t.transitions == [] for t in result.trajectories)

    slow = make_task(
        tmp_path, "slow", solve="sleep 30\n", test="echo 0.5 > /logs/verifier/reward.txt\n", agent_timeout=1
    )
    ctx, seen = context(tmp_path, sandbox_root)
    await run_group(ctx, builder := group(slow), sampling_client=None)
    assert [r.reward for r in builder.rewards] == [0.5, 0.5]
    assert {e.outcome for e in ended(seen)} == {TrialOutcome.TIME_LIMIT}
    assert builder.rewards[0].metrics == {f"exit_status/{TrialOutcome.TIME_LIMIT}": 1.0}


@pytest.mark.parametrize(
    "test_script, kinds",
    [
        # Harbor refuses a NaN reward file itself; our policy would refuse the value too.
        ("echo nan > /logs/verifier/reward.txt\n", {"VerifierOutputParseError", "NonFiniteReward"}),
        ("true  # writes no reward\n", {"RewardFileNotFoundError"}),
    ],
)
async def test_bad_rewards_raise_instead_of_scoring(tmp_path, sandbox_root, test_script, kinds):
    task = make_task(tmp_path, "bad", solve="true\n", test=test_script)
    ctx, seen = context(tmp_path, sandbox_root)
    with pytest.raises(TrialFailed) as failure:
        await run_group(ctx, group(task), sampling_client=None)
    assert failure.value.exception_type in kinds
    assert all(not e.scored for e in ended(seen))


def injected_environment(tmp_path, monkeypatch, sandbox_root, source: str, cls: str) -> dict:
    """trial.json's environment for a test-only LocalSandbox subclass defined in ``source``."""
    module = f"injected_{cls.lower()}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return {"import_path": f"{module}:{cls}", "kwargs": {"root": str(sandbox_root)}}


FLAKY_ENV = '''
import asyncio
import time

from tbconsole.sandbox.environment import LocalSandbox
from tests_support.processes import pids_with

class FlakySandbox(LocalSandbox):
    """Test-only fault injection: the sandbox of trial t1 fails to start, once the group's
    other two trials are running their agents."""
    async def start(self, force_build):
        if ".s0g0t1" in self.session_id:
            deadline = time.monotonic() + 60
            while len(pids_with("sleep 7461")) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            raise RuntimeError("sandbox not ready (injected)")
        await super().start(force_build)
'''


async def test_sandbox_start_failure_raises_and_cancels_the_group(tmp_path, sandbox_root, monkeypatch):
    task = make_task(tmp_path, "long", solve="sleep 7461\n", test="echo 1 > /logs/verifier/reward.txt\n")
    environment = injected_environment(tmp_path, monkeypatch, sandbox_root, FLAKY_ENV, "FlakySandbox")
    ctx, seen = context(tmp_path, sandbox_root, environment=environment)
    with pytest.raises(TrialFailed) as failure:
        await asyncio.wait_for(run_group(ctx, group(task, size=3), sampling_client=None), 120)
    assert failure.value.trial.endswith("t1")
    assert "not ready" in failure.value.message
    # run_group returns once every sandbox of the group is gone: no process may be left.
    assert pids_with("sleep 7461") == [], "the group's other trials were not cancelled"
    assert not any(e.scored for e in ended(seen))


SLOW_STOP_ENV = '''
import asyncio

from tbconsole.sandbox.environment import LocalSandbox

T1_STOPPING = asyncio.Event()


class SlowStopSandbox(LocalSandbox):
    """Test-only: slow sandbox removal. Trial t0 stops (then raises: no reward) only once t1 is
    stopping; t1's stop takes 2 s more, so the group's cancel lands in it, and Harbor swallows it."""
    async def _stop_sandbox(self):
        if ".s0g0t1" in self.session_id:
            T1_STOPPING.set()
            await asyncio.sleep(2)  # the slow removal itself
        else:
            await asyncio.wait_for(T1_STOPPING.wait(), 60)
        await super()._stop_sandbox()
'''


async def test_a_group_that_raised_leaves_no_sandbox_even_when_one_is_still_stopping(
    tmp_path, sandbox_root, monkeypatch
):
    task = make_task(tmp_path, "bad", solve="true\n", test="true  # writes no reward\n")
    environment = injected_environment(tmp_path, monkeypatch, sandbox_root, SLOW_STOP_ENV, "SlowStopSandbox")
    ctx, _ = context(tmp_path, sandbox_root, environment=environment)
    with pytest.raises(TrialFailed) as failure:
        await run_group(ctx, group(task), sampling_client=None)
    assert failure.value.exception_type == "RewardFileNotFoundError"
    assert not any(sandbox_root.iterdir()), "run_group returned before t1's sandbox was gone"


async def test_headless_decision_stops_and_console_can_retry(tmp_path, sandbox_root):
    task = make_task(tmp_path, "flaky", solve="true\n", test="true\n")  # no reward → raises
    ctx, seen = context(tmp_path, sandbox_root)
    strategy = HarborRolloutStrategy(ctx)

    class Policy:
        sampling_client = None

    with pytest.raises(TrialFailed):
        await strategy.execute(group(task), Policy())
    assert [e.decision for e in seen if e.kind == "decision.made"] == ["abort"]

    ctx2, seen2 = context(tmp_path, sandbox_root)
    ctx2.decision_timeout = None  # someone is there to decide
    strategy2 = HarborRolloutStrategy(ctx2)
    running = asyncio.create_task(strategy2.execute(group(task), Policy()))

    def errors() -> int:
        return sum(e.kind == "error.raised" for e in seen2)

    def awaiting(n_errors: int) -> Callable[[], bool]:
        return lambda: ctx2.control.state == ControlState.AWAITING_DECISION and errors() == n_errors

    await wait_until_async(awaiting(1), "the first failure asks for a decision")
    assert [e.decision_needed for e in seen2 if e.kind == "error.raised"] == [True]
    ctx2.control.decide("retry_group")
    await wait_until_async(awaiting(2), "the retried group fails and asks again")
    ctx2.control.decide("abort")
    with pytest.raises(TrialFailed):
        await running
    assert [e.decision for e in seen2 if e.kind == "decision.made"] == ["retry_group", "abort"]
    retried = {e.trial for e in ended(seen2)}
    assert any(t.endswith("-r1") for t in retried)  # the retry ran fresh trials


async def test_lost_capture_raises(tmp_path, sandbox_root):
    """mini-swe-agent really calls the model; its turn cannot be persisted (the capture folder
    sits on a full disk), so the trial must not be scored."""
    import tinker

    from tbconsole.engine.embedded import EmbeddedEngine

    task = make_task(tmp_path, "talk", solve="true\n", test="echo 0 > /logs/verifier/reward.txt\n")
    venv = Path(sys.prefix)
    agent = {
        "name": "mini-swe-agent",
        "model_name": "openai/policy",
        "override_timeout_sec": 30,
        "env": {
            "OPENAI_BASE_URL": "{proxy_url}/v1",
            "OPENAI_API_KEY": "{proxy_api_key}",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "PATH": f"{venv / 'bin'}:{BASE_PATH}",
        },
        "kwargs": {"max_tokens": 16, "skip_install": True, "config": {"agent": {"step_limit": 1}}},
    }
    environment = {
        "import_path": "tbconsole.sandbox:LocalSandbox",
        "kwargs": {"root": str(sandbox_root), "host_paths": [str(venv)]},
    }
    ctx, seen = context(tmp_path, sandbox_root, agent=agent, environment=environment)
    full = ctx.log_path / "capture"
    full.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        with open(full / "filler", "wb") as filler:  # fill the disk: folders still fit, data does not
            with contextlib.suppress(OSError):
                filler.write(b"x" * (1 << 20))
        with EmbeddedEngine(data_dir=str(tmp_path / "engine")) as engine:
            service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
            training = await service.create_lora_training_client_async("tbconsole/qwen3-tiny", rank=4)
            sampler = await training.save_weights_and_get_sampling_client_async()
            with pytest.raises(TrialFailed) as failure:
                await run_group(ctx, group(task, size=1), sampling_client=sampler)
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)
    assert failure.value.exception_type == "CaptureLost"
    # Stopped at once, not after the agent retried the refused call until its 30 s timeout.
    assert "stopped at once" in str(failure.value), failure.value
    assert any(e.kind == "proxy.capture_lost" for e in seen)
