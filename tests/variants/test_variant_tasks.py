"""The generated variant tasks under real Harbor trials: the real agent (mini-swe-agent, through
the capture proxy) issues each family's solution and near misses as its one tool call; the
verifier must pass the solution and fail every near miss, each trial ending in one turn."""

import asyncio
from pathlib import Path

import pytest

from tbconsole import variants as V
from tbconsole import warmup as W

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def chat():
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import load_tokenizer

    tokenizer = load_tokenizer()
    return get_renderer("qwen3_5", tokenizer), tokenizer


def run_command(tmp: Path, variant: V.Variant, command: str, chat) -> tuple[float, str, int]:
    from tbconsole.events import TrialEnded

    renderer, tokenizer = chat
    trial = asyncio.run(W.scripted_trial(tmp, variant, command, renderer, tokenizer))
    ended = next(e for e in trial.events if isinstance(e, TrialEnded))
    return trial.reward, ended.outcome, ended.turns


@pytest.mark.parametrize("family", sorted(V.FAMILIES))
def test_solution_passes_and_near_misses_fail(tmp_path, family, chat):
    variant = next(v for v in V.all_variants("train") if v.family == family)
    results = {
        cmd: run_command(tmp_path / f"c{i}", variant, cmd, chat) for i, (cmd, _) in enumerate(V.iter_commands(variant))
    }
    for command, solves in V.iter_commands(variant):
        reward, outcome, turns = results[command]
        assert (reward, outcome, turns) == (1.0 if solves else 0.0, "Submitted", 1), command


def test_recorded_prompt_splices_exactly_for_another_variant(tmp_path, chat):
    """The warm-up renders every variant's prompt from one recorded prompt: that splice must
    equal what the agent really sends for a different variant (another family, other names)."""
    renderer, tokenizer = chat
    first, second = V.sample_variants("train", 2, seed=3)
    prompt, reward = asyncio.run(W.record_prompt(tmp_path / "a", first, renderer, tokenizer))
    again, _ = asyncio.run(W.record_prompt(tmp_path / "b", second, renderer, tokenizer))
    assert reward == 1.0
    assert first.family != second.family
    assert prompt.tokens(tokenizer, second.instruction) == again.tokens(tokenizer, second.instruction)
