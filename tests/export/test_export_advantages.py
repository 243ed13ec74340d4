"""The export's advantages are the cookbook's, to the bit: the recipe's trajectories (per-step
rewards 0, the trial's reward as the group's final reward) through tinker_cookbook's own
compute_advantages, against the export's reproduction from the rewards alone."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker_cookbook.rl.data_processing import compute_advantages
from tinker_cookbook.rl.types import TrajectoryGroup

from tbconsole.export.advantages import group_advantages
from tbconsole.proxy.capture import CapturedTurn
from tbconsole.runner.rollout import to_trajectory

pytestmark = pytest.mark.timeout(300)


def turn(k: int) -> CapturedTurn:
    return CapturedTurn(
        turn=k,
        prompt_tokens=[1, 2, 3],
        output_tokens=[4],
        logprobs=[-0.5],
        stop_reason="stop",
        api="openai",
        started_at=0.0,
        sample_ms=1.0,
        max_tokens=8,
        temperature=1.0,
    )


def cookbooks(rewards: list[float], turns: list[int]) -> list[float]:
    group = TrajectoryGroup(
        trajectories_G=[to_trajectory([turn(k) for k in range(n)]) for n in turns],
        final_rewards_G=rewards,
        metrics_G=[{} for _ in rewards],
    )
    (advantages,) = compute_advantages([group])
    return [float(a) for a in advantages.tolist()]


rewards = st.one_of(
    st.floats(min_value=-10, max_value=10, allow_nan=False, width=64),
    st.sampled_from([0.0, 1.0, 0.5, 1 / 3, 0.1]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(rewards, st.integers(0, 3)), min_size=1, max_size=16))
def test_the_exports_advantages_are_the_cookbooks(group):
    values = [r for r, _ in group]
    assert group_advantages(values) == cookbooks(values, [n for _, n in group])


def test_centred_within_the_group_in_float32():
    assert group_advantages([0.0, 0.0, 1.0, 0.0]) == [-0.25, -0.25, 0.75, -0.25]
    third = group_advantages([1.0, 0.0, 0.0])
    assert third[0] == pytest.approx(2 / 3, abs=1e-7) and third[0] != 2 / 3  # float32, as the cookbook
