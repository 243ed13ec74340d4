"""Infrastructure failures are never scored, and attempts never mix: real Harbor trials in the
local sandbox, the real mini-swe-agent calling the real capture proxy, an unreachable proxy URL,
and the local engine killed mid-batch and started again (the outage ridden out). A gateway
frozen mid-batch is in test_gateway_faults."""

import asyncio
import sys
import time
from pathlib import Path

import pytest

from tbconsole.proxy import read_capture
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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_engine(port: int, data_dir: Path):
    """The engine on the Miles gateway's contract, as the SDK installed here can use it."""
    import socket
    import subprocess

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "engine",
            "--port",
            str(port),
            "--model",
            "tbconsole/qwen3-tiny-agent",
            "--data-dir",
            str(data_dir),
            "--contract",
            "miles-next",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        assert proc.poll() is None and time.monotonic() < deadline, "the engine did not start"
        time.sleep(0.2)


@pytest.mark.slow
async def test_the_engine_killed_mid_batch_then_restarted_is_ridden_out_and_trains_the_step(tmp_path, monkeypatch):
    """The whole runner, streaming minibatches, against an engine process on the Miles gateway's
    contract (serving only its latest weights) that is killed with SIGKILL while the batch's
    agents run: no trial is
    scored and nobody is asked; the engine is started again on the same port and data within
    gateway.outage_limit, the group runs a fresh attempt by itself, and the step trains on
    exactly its captures."""
    import json
    import signal

    from tbconsole.demo import recipe as demo
    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.record.control import RunControl
    from tbconsole.record.events import EventBus, read_events
    from tbconsole.runner import train
    from tbconsole.runner.options import parse

    register_with_cookbook()  # as the command line does: local model names resolve
    port, data = _free_port(), tmp_path / "engine"
    monkeypatch.setenv("TINKER_API_KEY", "tml-local")
    log = tmp_path / "run"
    parsed = demo.materialize(
        parse(
            [
                f"config.base_url=http://127.0.0.1:{port}",
                f"config.log_path={log}",
                "config.max_steps=1",
                "config.dataset_builder.groups_per_batch=1",
                "config.dataset_builder.group_size=2",
                "config.max_tokens=64",
                "config.eval_every=0",
                "config.kl_penalty_coef=0",
                "gateway.latest_weights_only=true",
                # The cookbook's streaming loop, whose groups run in tasks nobody awaits (one group:
                # nothing overlaps at this size; failing groups of a real stream: test_exit_stress).
                "config.stream_minibatch_config.groups_per_batch=1",
                "config.stream_minibatch_config.num_minibatches=1",
            ],
            demo.demo_defaults(),
        )
    )
    engine = _start_engine(port, data)
    bus = EventBus(log)
    control = RunControl(bus.publish)
    try:
        running = asyncio.create_task(train.main(parsed, bus, control, decision_timeout=None))
        while not any(e.kind == "group.started" for e in read_events(log / "events.jsonl")):
            assert not running.done(), running.exception()
            await asyncio.sleep(0.1)
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        killed = time.monotonic()

        def riding_out() -> bool:
            return any(
                e.kind == "log" and "runs again once the gateway answers" in e.message
                for e in read_events(log / "events.jsonl")
            )

        while not riding_out():
            assert not running.done(), running.exception()
            assert time.monotonic() - killed < 90, "the engine's death was not noticed within 90 s"
            await asyncio.sleep(0.1)
        events = list(read_events(log / "events.jsonl"))
        assert [e for e in events if e.kind == "trial.ended" and e.scored] == [], "scored against a dead engine"
        engine = await asyncio.to_thread(_start_engine, port, data)
        result = await asyncio.wait_for(running, 300)
    finally:
        engine.kill()
        engine.wait()
        bus.close()
    assert result.status == "done", result
    events = list(read_events(log / "events.jsonl"))
    assert [e.decision for e in events if e.kind == "decision.made"] == []  # an outage asks nobody
    scored_trials = sorted(e.trial for e in events if e.kind == "trial.ended" and e.scored)
    assert len(scored_trials) == 2 and all(t.endswith("-r1") for t in scored_trials)
    step_dir = log / "capture" / "step_000000"
    fresh = [t for p in sorted(step_dir.glob("group_000-r1/*.jsonl")) for t in read_capture(p)]
    metrics = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0]
    assert sum(len(t.output_tokens) for t in fresh) == metrics[0]["env/all/total_ac_tokens"] > 0
