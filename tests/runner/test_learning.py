"""Learning you can watch, as a regression test: a short `tbconsole demo` run on the embedded
default (warm-started policy, generated variants, real Harbor trials, real PPO updates through
the cookbook loop) must make the policy more likely to solve held-out variants.

The measure is the policy's exact probability of replying with the solution (its expected
reward) to the held-out prompts the run itself showed it, before and after, read from the engine
(`warmup.reply_probabilities`, every form of the reply): no sampling noise, so a short run suffices.
A change that breaks log-prob alignment, flips advantage signs or drops the LoRA update leaves
it flat or pushes it down."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tbconsole import variants as V
from tbconsole import warmup as W
from tbconsole.runner.demo import DEMO_DEFAULTS, HELDOUT_VARIANTS

pytestmark = [pytest.mark.root, pytest.mark.slow]

STEPS = 4  # short keeps `make test` quick: the exact-probability measure has no sampling noise
MODEL = DEMO_DEFAULTS["config.model_name"]
RISE = 0.02  # the least rise in mean solution probability that counts as learning


def heldout_prompts(log: Path) -> dict[str, list[int]]:
    """Each held-out task's first prompt as the proxy rendered it in the run's first evaluation:
    the measure reads the policy on the very prompts the run showed it (they hold the sandbox's
    kernel version, so a prompt recorded elsewhere differs by a token or two, and a policy this
    small answers a token apart differently)."""
    from tbconsole.proxy.capture import read_capture

    first = log / "heldout" / "capture" / "step_000000"
    prompts = {}
    for path in sorted(first.glob("*/*.jsonl")):
        task = path.name.split(".")[0]
        prompts.setdefault(task, read_capture(path)[0].prompt_tokens)
    return prompts


def _solution_probabilities(log: Path, sampler_path: str | None) -> dict[str, float]:
    import tinker
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.registry import load_tokenizer

    renderer = get_renderer("qwen3_5", load_tokenizer())
    prompts = heldout_prompts(log)
    assert len(prompts) == HELDOUT_VARIANTS, sorted(prompts)
    with EmbeddedEngine(data_dir=log / "engine", model=MODEL) as engine:
        service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        made = (
            service.create_sampling_client(model_path=sampler_path)
            if sampler_path
            else service.create_sampling_client(base_model=MODEL)
        )
        client = W._resolved(made)
        out = {}
        for task, context in prompts.items():
            solution = V.parse_variant(task).solution
            out[task] = W.reply_probabilities(client, context, renderer, [solution])[solution]
        return out


def test_a_short_demo_run_raises_the_expected_reward_on_held_out_variants(tmp_path):
    """The demo's defaults, shortened to STEPS steps."""
    log = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "demo",
            "--headless",
            f"config.log_path={log}",
            f"config.max_steps={STEPS}",
            f"config.eval_every={STEPS}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1500,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    rows = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert [r["progress/batch"] for r in rows if "progress/batch" in r] == list(range(STEPS))
    # Held-out tasks were scored before the first update (in step 0's row) and after the last
    # (a row of its own), each with every trial.
    held = [
        (r.get("progress/batch"), r["eval/heldout/after_updates"], r["eval/heldout/trials"])
        for r in rows
        if "eval/heldout/reward" in r
    ]
    assert held == [(0, 0, 8), (None, STEPS, 8)]
    # The console sees each evaluation begin and end (events.jsonl), with the same counts.
    marks = [
        (e["kind"], e["after_updates"], e["trials"])
        for e in map(json.loads, (log / "events.jsonl").read_text().splitlines())
        if e["kind"].startswith("evaluation.")
    ]
    assert marks == [
        ("evaluation.started", 0, 8),
        ("evaluation.ended", 0, 8),
        ("evaluation.started", STEPS, 8),
        ("evaluation.ended", STEPS, 8),
    ]
    final = json.loads((log / "checkpoints.jsonl").read_text().splitlines()[-1])

    before = _solution_probabilities(log, None)
    after = _solution_probabilities(log, final["sampler_path"])
    mean_before = sum(before.values()) / len(before)
    mean_after = sum(after.values()) / len(after)
    assert mean_before <= 0.4, f"the starting policy already solves the variants: {before}"
    # The margin sits well below the rises a working loop gives in STEPS steps (about 0.05 to
    # 0.12, varying with the rollouts sampled) and well above what the breakages above give: a
    # dropped update leaves it exactly flat, a flipped sign or misaligned log-probs push it down.
    assert mean_after >= mean_before + RISE, f"expected reward did not rise: {before} -> {after}"
