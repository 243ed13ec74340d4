"""A group's advantages as the cookbook computes them, reproduced from the group's rewards.

``tinker_cookbook.rl.data_processing.compute_advantages`` takes each group's total rewards (a
trajectory's per-step rewards, all 0 in the recipe, plus the group's final reward: the trial's
verifier reward), makes a float32 tensor of them and subtracts its mean: centred within the
group, not divided by the standard deviation. The same two tensor operations here give the same
float32 numbers (a test checks them against the cookbook's own function). torch is imported when
the first group is computed.
"""

from __future__ import annotations

from collections.abc import Sequence

SOURCE = (
    "reproduced from the group's rewards as tinker_cookbook's compute_advantages computes it: "
    "reward minus the group's mean reward, in float32"
)


def group_advantages(rewards: Sequence[float]) -> list[float]:
    """Each trial's advantage, in the group's order."""
    import torch

    rewards_G = torch.tensor([float(r) for r in rewards])
    advantages_G = rewards_G - rewards_G.mean()
    return [float(a) for a in advantages_G.tolist()]
