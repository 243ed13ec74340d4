"""Infrastructure failures are never scored, and attempts never mix: real Harbor trials in the
local sandbox, the real mini-swe-agent calling the real capture proxy, an unreachable proxy URL.
The local engine killed mid-batch and started again (the outage ridden out) is in
test_offpolicy_e2e, a gateway frozen mid-batch in test_gateway_faults."""

import asyncio
import sys
from pathlib import Path

import pytest

from tbconsole.record.enums import FailureKind
from tbconsole.record.events import TrialEnded
from tbconsole.runner.outcomes import TrialFailed
from tbconsole.runner.rollout import run_group
from tbconsole.sandbox.namespace import BASE_PATH

from tests_support.trials import context, group, make_task

pytestmark = [pytest.mark.e2e, pytest.mark.root]


def agent_config(timeout: float = 60) -> dict:
    venv = Path(sys.prefix)
    return {
        "name": "mini-swe-agent",
        "model_name": "openai/policy",
        "override_timeout_sec": timeout,
        "env": {
            "OPENAI_BASE_URL": "{proxy_url}/v1",
            "OPENAI_API_KEY": "{proxy_api_key}",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PATH": f"{venv / 'bin'}:{BASE_PATH}",
        },
        "kwargs": {"max_tokens": 16, "skip_install": True, "config": {"agent": {"step_limit": 1}}},
    }


def environment(sandbox_root) -> dict:
    return {
        "import_path": "tbconsole.sandbox:LocalSandbox",
        "kwargs": {"root": str(sandbox_root), "host_paths": [sys.prefix]},
    }


def scored(seen) -> list[TrialEnded]:
    return [e for e in seen if isinstance(e, TrialEnded) and e.scored]


async def test_resumed_or_rerun_steps_never_share_names_or_files(tmp_path, sandbox_root):
    """The same group run twice (a resumed step), and a fixed trials_dir holding another run's
    folder: every attempt gets its own trial ids, trial folders and capture folder."""
    task = make_task(tmp_path, "ok", solve="echo done > /app/out\n", test="echo 1 > /logs/verifier/reward.txt\n")
    fixed = tmp_path / "harbor-trials"
    (fixed / "ok.s0g0t0").mkdir(parents=True)  # left there by an earlier run
    (fixed / "ok.s0g0t0" / "exception.txt").write_text("an earlier run's failure")
    ctx, seen = context(tmp_path, sandbox_root)
    ctx.template.raw["trials_dir"] = str(fixed)
    await run_group(ctx, group(task), sampling_client=None)
    ctx2, seen2 = context(tmp_path, sandbox_root)  # same log_path: the step runs again
    ctx2.template.raw["trials_dir"] = str(fixed)
    await run_group(ctx2, group(task), sampling_client=None)
    first = [e.trial for e in seen if isinstance(e, TrialEnded)]
    second = [e.trial for e in seen2 if isinstance(e, TrialEnded)]
    assert sorted(first) == ["ok.s0g0t0-r1", "ok.s0g0t1-r1"]
    assert sorted(second) == ["ok.s0g0t0-r2", "ok.s0g0t1-r2"]
    for trial in first + second:
        assert not (fixed / trial / "exception.txt").exists()
        assert (fixed / trial / "result.json").exists()
    captures = sorted(p.name for p in (ctx.log_path / "capture" / "step_000000").iterdir())
    assert captures == ["group_000-r1", "group_000-r2"]


async def test_an_unreachable_proxy_url_is_not_scored(tmp_path, sandbox_root):
    """The agent cannot reach {proxy_url} (advertised on an address nothing listens on): its
    trial ends with no model call and must raise, not score 0."""
    # The agent retries until its timeout; whether it got as far as a first try by then or not, no
    # model call reached the proxy: a short timeout tests the same.
    task = make_task(tmp_path, "talk", solve="true\n", test="echo 0 > /logs/verifier/reward.txt\n", agent_timeout=8)
    ctx, seen = context(tmp_path, sandbox_root, agent=agent_config(timeout=8), environment=environment(sandbox_root))
    ctx.advertised_host = "127.0.0.2"  # loopback, but the proxy listens on 127.0.0.1 only
    with pytest.raises(TrialFailed) as failure:
        await asyncio.wait_for(run_group(ctx, group(task, size=1), sampling_client=None), 120)
    assert failure.value.exception_type == FailureKind.NO_MODEL_CALL
    assert "no request reached the capture proxy" in failure.value.message
    assert scored(seen) == []
