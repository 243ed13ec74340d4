"""The generated variant tasks under real Harbor trials: the real agent (mini-swe-agent, through
the capture proxy) issues each family's solution and near misses (after the look-up, for a
two-command family); the verifier must pass the solution and fail every near miss, each trial
ending in as many turns as it has commands."""

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


def run_command(tmp: Path, variant: V.Variant, command: str | list[str], chat) -> tuple[float, str, int]:
    from tbconsole.events import TrialEnded

    renderer, tokenizer = chat
    trial = asyncio.run(W.scripted_trial(tmp, variant, command, renderer, tokenizer))
    ended = next(e for e in trial.events if isinstance(e, TrialEnded))
    return trial.reward, ended.outcome, ended.turns


@pytest.mark.parametrize("family", sorted(V.FAMILIES))
def test_solution_passes_and_near_misses_fail(tmp_path, family, chat):
    variant = next(v for v in V.all_variants("train") if v.family == family)
    results = {
        cmd: run_command(tmp_path / f"c{i}", variant, variant.steps(cmd), chat)
        for i, (cmd, _) in enumerate(V.iter_commands(variant))
    }
    for command, solves in V.iter_commands(variant):
        reward, outcome, turns = results[command]
        assert (reward, outcome, turns) == (1.0 if solves else 0.0, "Submitted", len(variant.steps(command))), command


@pytest.mark.parametrize("family", V.MULTI_TURN_FAMILIES)
def test_acting_without_the_look_up_fails(tmp_path, family, chat):
    """The solution's command on a file the instruction does name (the pointer file) or on a
    decoy, issued at once: the verifier rejects it in one turn."""
    variant = next(v for v in V.all_variants("train") if v.family == family)
    decoy = next(name for name in variant.files()[0] if name not in (variant.target, V.POINTER))
    for i, name in enumerate((V.POINTER, decoy)):
        command = variant.solution.replace(variant.target, name)
        assert run_command(tmp_path / f"c{i}", variant, command, chat) == (0.0, "Submitted", 1), command


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


def test_recorded_observation_splices_exactly_for_another_variant(tmp_path, chat):
    """The two-turn demonstrations render the second prompt as the first prompt, the look-up's
    reply and the recorded observation with another variant's look-up output spliced in: that
    must equal the second prompt the agent really sends for a variant of the other family (the
    form token continuity keeps, which the renderer's history form of this reply equals)."""
    renderer, tokenizer = chat
    first, second = V.sample_variants("train", 2, seed=5, families=V.MULTI_TURN_FAMILIES)
    assert first.family != second.family and first.target != second.target
    prompt, observation, reward = asyncio.run(W.record_prompts(tmp_path / "a", first, renderer, tokenizer))
    assert reward == 1.0 and observation is not None
    trial = asyncio.run(W.scripted_trial(tmp_path / "b", second, second.steps(second.solution), renderer, tokenizer))
    assert trial.reward == 1.0 and len(trial.prompts) == 2
    lookup = W.tool_call_reply(renderer, second.lookup, submit=False)
    spliced = prompt.tokens(tokenizer, second.instruction) + lookup
    assert trial.prompts[0] == prompt.tokens(tokenizer, second.instruction)
    assert trial.prompts[1] == spliced + observation.tokens(tokenizer, W.observation_text(W.lookup_output(second)))
    assert second.target in tokenizer.decode(trial.prompts[1][len(spliced) :])
    assert second.target not in tokenizer.decode(trial.prompts[0])  # only the look-up finds it out
