"""The generated variant tasks under real Harbor trials in the local sandbox.

The verifier is checked with oracle trials (Harbor runs the task's ``solve.sh``, here each
command in turn): it must pass the solution and fail every near miss, and for a two-command
family fail acting on the pointer file or a decoy without the look-up. The agent's side is
checked with the real agent (mini-swe-agent, through the capture proxy) issuing the solution as
scripted replies, for one one-command family (they share that path) and both two-command
families: the trial ends in as many turns as it has commands, and a two-command family's trial,
given a third look around the folder between its two commands, is a three-turn trial that
trains as one datum (token continuity, through the cookbook's own
``trajectory_to_data``). Those agent trials also carry the warm-up's splice checks: the prompts
it renders from one recorded trial must equal what the agent really sends for another variant.

An oracle trial takes well under a second here; an agent trial about five (most of it the
agent's start-up), so each command gets the cheaper one unless the agent is what is checked."""

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from tbconsole.demo import variants as V
from tbconsole.demo import warmup as W

pytestmark = [pytest.mark.e2e, pytest.mark.root]

LOOK_AROUND = "ls /app"  # the extra turn of a two-command family's agent trial


@pytest.fixture(scope="module")
def chat():
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import load_tokenizer

    tokenizer = load_tokenizer()
    return get_renderer("qwen3_5", tokenizer), tokenizer


@dataclass
class AgentTrial:
    variant: V.Variant
    commands: list[str]
    trial: W.ScriptedTrial
    work_dir: Path


def agent_commands(variant: V.Variant) -> list[str]:
    """The solution's commands, with a look around between the look-up and the act."""
    steps = variant.steps(variant.solution)
    return [steps[0], LOOK_AROUND, *steps[1:]] if variant.lookup else steps


# The agent's side: one one-command family (they share the agent's path: one reply, one turn)
# and both two-command families (the splice checks need two of them).
AGENT_FAMILIES = (V.ONE_COMMAND_FAMILIES[0], *V.MULTI_TURN_FAMILIES)


@pytest.fixture(scope="module")
def agent_trials(tmp_path_factory, chat) -> dict[str, AgentTrial]:
    """One real agent trial per family of AGENT_FAMILIES, the solution scripted as its replies;
    the two two-command variants have different targets, so the splice checks see different names."""
    renderer, tokenizer = chat
    root = tmp_path_factory.mktemp("agent")
    chosen: dict[str, V.Variant] = {}
    for variant in V.all_variants("train"):
        if variant.family in chosen or variant.family not in AGENT_FAMILIES:
            continue
        if variant.lookup and any(v.lookup and v.target == variant.target for v in chosen.values()):
            continue
        chosen[variant.family] = variant
    assert sorted(chosen) == sorted(AGENT_FAMILIES)
    out = {}
    for family, variant in sorted(chosen.items()):
        commands = agent_commands(variant)
        work_dir = root / family
        trial = asyncio.run(W.scripted_trial(work_dir, variant, commands, renderer, tokenizer))
        out[family] = AgentTrial(variant, commands, trial, work_dir)
    return out


def oracle_reward(tmp: Path, variant: V.Variant, commands: list[str]) -> float | None:
    """The verifier's reward after Harbor's oracle agent ran ``commands`` in a fresh sandbox."""
    from tbconsole.runner.single_trial import build_trial_config, run_trial

    task = V.write_task(variant, tmp / "tasks")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + "\n".join(commands) + "\n")
    summary = asyncio.run(run_trial(build_trial_config(task, trials_dir=tmp / "trials")))
    assert summary.ok, summary.lines()
    return summary.reward


@pytest.mark.parametrize("family", sorted(V.FAMILIES))
def test_the_verifier_passes_the_solution_and_fails_every_near_miss(tmp_path, family):
    variant = next(v for v in V.all_variants("train") if v.family == family)
    commands = list(V.iter_commands(variant))
    assert len(commands) >= 3  # the solution and at least two near misses
    rewards = {
        cmd: oracle_reward(tmp_path / f"c{i}", variant, variant.steps(cmd)) for i, (cmd, _) in enumerate(commands)
    }
    assert rewards == {cmd: 1.0 if solves else 0.0 for cmd, solves in commands}


@pytest.mark.parametrize("family", V.MULTI_TURN_FAMILIES)
def test_acting_without_the_look_up_fails(tmp_path, family):
    """The solution's command on a file the instruction does name (the pointer file) or on a
    decoy, without looking first: the verifier rejects it."""
    variant = next(v for v in V.all_variants("train") if v.family == family)
    decoy = next(name for name in variant.files()[0] if name not in (variant.target, V.POINTER))
    for i, name in enumerate((V.POINTER, decoy)):
        command = variant.solution.replace(variant.target, name)
        assert command != variant.solution
        assert oracle_reward(tmp_path / f"c{i}", variant, [command]) == 0.0, command


def test_the_agent_solves_each_family_in_as_many_turns_as_commands(agent_trials):
    from tbconsole.record.events import TrialEnded

    for family, run in agent_trials.items():
        ended = next(e for e in run.trial.events if isinstance(e, TrialEnded))
        assert (run.trial.reward, ended.outcome, ended.turns) == (1.0, "Submitted", len(run.commands)), family
        assert len(run.trial.prompts) == len(run.commands), family


def test_a_three_turn_agent_trial_trains_as_one_datum(agent_trials):
    """A real mini-swe-agent trial of three model calls through the proxy: every later prompt
    carries on the one before with the exact sampled tokens, so the cookbook makes one datum of
    it, the loss on the sampled tokens only."""
    from tinker_cookbook.rl.data_processing import trajectory_to_data

    from tbconsole.proxy import read_capture
    from tbconsole.record.events import TrialEnded
    from tbconsole.runner.rollout import to_trajectory

    for family in V.MULTI_TURN_FAMILIES:
        run = agent_trials[family]
        ended = next(e for e in run.trial.events if isinstance(e, TrialEnded))
        assert ended.turns == 3, family
        assert ended.datums == 1 and ended.new_datum == {}, ended
        assert ended.trained_tokens == ended.context_tokens - 1, ended
        [capture] = sorted((run.work_dir / "capture").rglob("*.jsonl"))
        turns = list(read_capture(capture))
        assert [t.continues for t in turns] == [None, 0, 1], family
        [datum] = trajectory_to_data(to_trajectory(turns), 0.5)
        mask = datum.loss_fn_inputs["mask"].to_torch().tolist()
        assert sum(mask) == sum(len(t.output_tokens) for t in turns), family
        tokens = datum.model_input.to_ints()
        for turn in turns:
            start = len(turn.prompt_tokens)
            assert tokens[:start] == turn.prompt_tokens[: len(tokens[:start])]
            assert mask[start - 1 : start - 1 + len(turn.output_tokens)] == [1.0] * len(turn.output_tokens)


def test_recorded_prompt_splices_exactly_for_another_variant(agent_trials, chat):
    """The warm-up renders every variant's prompt from one recorded prompt: that splice must
    equal what the agent really sends for a variant of another family (other names)."""
    renderer, tokenizer = chat
    families = sorted(agent_trials)
    for first, second in zip(families, families[1:] + families[:1], strict=True):
        a, b = agent_trials[first], agent_trials[second]
        prompt, _observation = W.cut_prompts(a.trial, a.variant, renderer, tokenizer)
        assert a.variant.instruction != b.variant.instruction
        assert prompt.tokens(tokenizer, b.variant.instruction) == b.trial.prompts[0], (first, second)


def test_recorded_observation_splices_exactly_for_another_variant(agent_trials, chat):
    """The two-turn demonstrations render the second prompt as the first prompt, the look-up's
    reply and the recorded observation with another variant's look-up output spliced in: that
    must equal the second prompt the agent really sends for a variant of the other family (the
    form token continuity keeps, which the renderer's history form of this reply equals)."""
    renderer, tokenizer = chat
    first, second = (agent_trials[f] for f in V.MULTI_TURN_FAMILIES)
    assert first.variant.target != second.variant.target
    prompt, observation = W.cut_prompts(first.trial, first.variant, renderer, tokenizer)
    assert observation is not None
    lookup = W.tool_call_reply(renderer, second.variant.lookup, submit=False)
    spliced = prompt.tokens(tokenizer, second.variant.instruction) + lookup
    assert second.trial.prompts[0] == prompt.tokens(tokenizer, second.variant.instruction)
    observed = observation.tokens(tokenizer, W.observation_text(W.lookup_output(second.variant)))
    assert second.trial.prompts[1] == spliced + observed
    assert second.variant.target in tokenizer.decode(second.trial.prompts[1][len(spliced) :])
    assert second.variant.target not in tokenizer.decode(second.trial.prompts[0])  # only the look-up finds it out
