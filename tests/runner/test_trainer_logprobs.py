"""The trainer's per-token log-probs: datums planned from captured turns match the cookbook's own
datums (same target tokens, output tokens exactly where its loss mask is), and a
``forward_backward`` result is written per trial and turn beside the captures."""

from types import SimpleNamespace

import orjson
import pytest
import tinker
from tinker import TensorData
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.rollout_strategy import RolloutResult
from tinker_cookbook.rl.types import Trajectory, Transition

from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.trainer_logprobs import TrainerLogprobs, _digest, plan_datums

# Turn 1 extends turn 0 (prompt = turn 0's prompt + output + more); turn 2 starts afresh.
TURNS = [([1, 2, 3], [10, 11]), ([1, 2, 3, 10, 11, 4, 5], [12, 13, 14]), ([7, 8], [15])]


def _trajectory():
    return Trajectory(
        transitions=[
            Transition(
                ob=tinker.ModelInput.from_ints(prompt),
                ac=TokensWithLogprobs(tokens=output, maybe_logprobs=[-0.5] * len(output)),
                reward=0.0,
                episode_done=i == len(TURNS) - 1,
            )
            for i, (prompt, output) in enumerate(TURNS)
        ],
        final_ob=tinker.ModelInput.empty(),
    )


def test_planned_datums_match_the_cookbooks():
    data = trajectory_to_data(_trajectory(), 1.0)
    plans = plan_datums(0, 0, "t", TURNS)
    assert len(plans) == len(data) == 2
    for (digest, plan), datum in zip(plans, data, strict=True):
        assert digest == _digest(datum.loss_fn_inputs["target_tokens"].to_numpy())
        mask = datum.loss_fn_inputs["mask"].to_numpy()
        planned = sorted(i for _, start, count in plan.turns for i in range(start, start + count))
        assert planned == [i for i, m in enumerate(mask) if m > 0]
    assert [t for _, p in plans for t, _, _ in p.turns] == [0, 1, 2]


def test_a_forward_backward_result_is_written_per_turn(tmp_path):
    folder = RunFolder(tmp_path)
    recorder = TrainerLogprobs(folder)
    # Two trials that sampled the very same turns: their datums are identical.
    trials = ["task.s3g1t0", "task.s3g1t1"]
    recorder.add_group(3, 1, trials, RolloutResult(trajectories=[_trajectory(), _trajectory()], envs=[], errors=[]))
    data = trajectory_to_data(_trajectory(), 1.0) * 2
    outputs = [
        {"logprobs": TensorData(data=[-float(i) / 10 for i in range(d.model_input.length)], dtype="float32")}
        for d in data
    ]
    recorder.record(data, SimpleNamespace(loss_fn_outputs=outputs))
    for trial in trials:
        path = folder.trainer_logprobs_file(3, 1, trial)
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert [r["turn"] for r in rows] == [0, 1, 2]
        # Turn 0's outputs are targets 2..3 of the first datum; turn 2's is target 1 of the second.
        assert rows[0]["logprobs"] == pytest.approx([-0.2, -0.3], rel=1e-6)
        assert len(rows[1]["logprobs"]) == 3 and len(rows[2]["logprobs"]) == 1
    assert not recorder.plans  # matched datums are let go


def test_the_sampler_and_the_trainer_are_compared_by_each_turns_staleness(tmp_path):
    # One trial whose turns were sampled with the weights of updates 4, 5 and 5, trained in update 5:
    # turn 0 is one update stale, turns 1 and 2 fresh. The sampler said -0.5 for every token.
    recorder = TrainerLogprobs(RunFolder(tmp_path))
    result = RolloutResult(trajectories=[_trajectory()], envs=[], errors=[])
    recorder.add_group(4, 0, ["task.s4g0t0"], result, weights=[[4, 5, 5]])
    data = trajectory_to_data(_trajectory(), 1.0)
    trainer = [-0.5] * 12  # as the sampler, except turn 0's two tokens (targets 2..3 of datum 0)
    trainer[2:4] = [-0.1, -0.1]
    outputs = [{"logprobs": TensorData(data=trainer[: d.model_input.length], dtype="float32")} for d in data]
    recorder.record(data, SimpleNamespace(loss_fn_outputs=outputs), update=5)
    figures = recorder.take_figures()
    assert figures["offpolicy/kl_sample_train/s1"] == pytest.approx(-0.4)  # mean(-0.5 - -0.1)
    assert figures["offpolicy/clipped_share/s1"] == 1.0  # exp(0.4) = 1.49: beyond 1.2
    assert figures["offpolicy/kl_sample_train/fresh"] == pytest.approx(0.0, abs=1e-6)
    assert figures["offpolicy/clipped_share/fresh"] == 0.0
    assert figures["offpolicy/stale_token_share"] == pytest.approx(2 / 6)
    assert recorder.take_figures() == {}  # one update's figures, taken once
