"""The real `tinker_cookbook.rl.train.main` trains 2 steps against the engine on a tiny
in-test environment, then a second run (on a restarted engine, same data dir) resumes at step 2
from `checkpoints.jsonl`. The engine here asks the SDK for zstd-compressed forward_backward
bodies, so that path is exercised end to end too."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import chz
import pytest
import tinker
from tinker_cookbook import renderers
from tinker_cookbook.rl.train import Config, main
from tinker_cookbook.rl.types import (
    Env,
    EnvGroupBuilder,
    RLDataset,
    RLDatasetBuilder,
    StepResult,
)

from tbconsole.engine import DEFAULT_MODEL, EmbeddedEngine, register_with_cookbook
from tbconsole.engine.registry import load_tokenizer

# The cookbook (0.5.8) still calls SDK methods that 0.38 deprecates.
pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::FutureWarning")]

PROMPTS = ["Print the current directory.", "Count the files in /tmp.", "Show the date."]


class TinyEnv(Env):
    """One turn: the reward is the share of the reply's tokens that are even ids (anything
    deterministic with spread inside a group will do)."""

    def __init__(self, prompt: str, renderer: renderers.Renderer):
        self.prompt = prompt
        self.renderer = renderer

    async def initial_observation(self):
        messages = [{"role": "user", "content": self.prompt}]
        return self.renderer.build_generation_prompt(messages), self.renderer.get_stop_sequences()

    async def step(self, action, *, extra=None) -> StepResult:
        reward = sum(1 for t in action if t % 2 == 0) / max(1, len(action))
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=tinker.ModelInput.from_ints([]),
            next_stop_condition=[],
        )


class TinyGroup(EnvGroupBuilder):
    def __init__(self, prompt: str, group_size: int):
        self.prompt = prompt
        self.group_size = group_size

    async def make_envs(self) -> Sequence[Env]:
        renderer = renderers.get_renderer("qwen3_5", load_tokenizer())
        return [TinyEnv(self.prompt, renderer) for _ in range(self.group_size)]

    def logging_tags(self) -> list[str]:
        return ["tiny"]


class TinyDataset(RLDataset):
    def __init__(self, n_batches: int, groups_per_batch: int, group_size: int):
        self.n_batches, self.groups_per_batch, self.group_size = n_batches, groups_per_batch, group_size

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        return [TinyGroup(PROMPTS[(index + g) % len(PROMPTS)], self.group_size) for g in range(self.groups_per_batch)]

    def __len__(self) -> int:
        return self.n_batches


@chz.chz
class TinyDatasetBuilder(RLDatasetBuilder):
    n_batches: int = 3
    groups_per_batch: int = 2
    group_size: int = 3

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        return TinyDataset(self.n_batches, self.groups_per_batch, self.group_size), None


def _config(base_url: str, log_path: Path, max_steps: int) -> Config:
    return Config(
        learning_rate=1e-3,
        dataset_builder=TinyDatasetBuilder(),
        model_name=DEFAULT_MODEL,
        renderer_name="qwen3_5",
        recipe_name="tbconsole-engine-test",
        max_tokens=12,
        log_path=str(log_path),
        base_url=base_url,
        lora_rank=8,
        save_every=1,
        eval_every=0,
        max_steps=max_steps,
        num_groups_to_log=0,
    )


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
async def test_rl_train_two_steps_then_resume(tmp_path, monkeypatch, device):
    monkeypatch.setenv("TINKER_API_KEY", "tml-local")
    register_with_cookbook()
    data_dir, log_path = tmp_path / "engine", tmp_path / "run"

    async with EmbeddedEngine(data_dir=data_dir, device=device, max_context=4096, compress_fwdbwd=True) as eng:
        await main(_config(eng.base_url, log_path, max_steps=2))

    metrics = _jsonl(log_path / "metrics.jsonl")
    steps = [m["step"] for m in metrics if "env/all/reward/total" in m]
    assert steps == [0, 1]
    for m in metrics:
        if "env/all/reward/total" in m:
            assert "optim/kl_sample_train_v1" in m and abs(m["optim/kl_sample_train_v1"]) < 1e-3
            assert m["grad_norm:mean"] > 0
    ckpts = _jsonl(log_path / "checkpoints.jsonl")
    resumable = [c for c in ckpts if c.get("state_path")]
    assert resumable and resumable[-1]["batch"] == 2
    assert resumable[-1]["state_path"].startswith("tinker://")

    # A restarted engine over the same data dir: the run picks up at step 2 from disk.
    async with EmbeddedEngine(data_dir=data_dir, device=device, max_context=4096) as eng:
        await main(_config(eng.base_url, log_path, max_steps=3))

    metrics = _jsonl(log_path / "metrics.jsonl")
    steps = [m["step"] for m in metrics if "env/all/reward/total" in m]
    assert steps == [0, 1, 2]
    logs = (log_path / "logs.log").read_text()
    assert "Resumed training from " + resumable[-1]["state_path"] in logs
    assert _jsonl(log_path / "checkpoints.jsonl")[-1]["batch"] == 3
