"""Whether a trial's sampled tokens were trained on, and with which advantage: the recipe's rule,
read from the run's state (no training data is needed).

The recipe hands the cookbook one trajectory per trial, the trial's captured turns in order
(``tbconsole.runner.rollout``); a group is trained only when every one of its trials was scored
(an unscored trial fails the group: the run stops, or the group is retried as a new attempt).
The cookbook (``tinker_cookbook.rl.data_processing``) then:

- gives every trajectory of a group the advantage ``reward - mean(group's rewards)``
  (``compute_advantages``: centred by the group mean, not divided by the std);
- builds datums whose action tokens (every sampled output token) carry that advantage and loss
  mask 1, and whose prompt tokens carry 0 (``trajectory_to_data``; no turn is masked for a
  parse error here: the recipe's transitions carry no such metric);
- drops groups whose rewards are all equal only when ``config.remove_constant_reward_groups``
  is set (off by default), keeping the first group when every group of the batch is constant
  (``remove_constant_reward_groups``); otherwise such a group trains with advantage 0.

Held-out evaluation trials are scored and never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

from tbconsole.common.formatting import format_value
from tbconsole.state import RunState


@dataclass(frozen=True)
class Training:
    """What the update did (or will do) with one trial's sampled tokens."""

    mask: bool | None  # loss mask of its output tokens: True trained on, False not, None not known yet
    why: str  # one line, for the detail line and the header
    advantage: float | None = None  # reward - group mean, once the group's rewards are known
    trained: bool = False  # the trial's step has trained: the advantage is what the update used


def _all_same(rewards: list[float]) -> bool:
    return all(r == rewards[0] for r in rewards)  # the cookbook's exact-equality test


def _removes_constant_groups(state: RunState) -> bool:
    config = state.config.get("config", state.config) if isinstance(state.config, dict) else {}
    return bool(isinstance(config, dict) and config.get("remove_constant_reward_groups"))


def _known(rewards: list[float | None]) -> list[float] | None:
    return None if not rewards or any(r is None for r in rewards) else [r for r in rewards if r is not None]


def _kept_when_all_constant(state: RunState, step: int, group: int) -> bool:
    """With constant groups removed, the cookbook keeps the first group when all are constant."""
    groups = sorted((k[1], g) for k, g in state.groups.items() if k[0] == step and g.ok is not False)
    rewards = [_known(g.trial_rewards(state.trials)) for _, g in groups]
    if not groups or any(r is None or not _all_same(r) for r in rewards):
        return False
    return groups[0][0] == group


def trial_training(state: RunState, trial: str, evaluation: bool = False) -> Training:
    """``evaluation``: the caller knows it for a held-out trial (found by its capture file);
    one of the held-out evaluation's trials in the state is known as such here too."""
    t = state.trials.get(trial)
    if evaluation or (t is None and (held := state.find_trial(trial)) is not None and held.evaluation):
        return Training(False, "held-out evaluation trial: scored, never trained on", trained=True)
    if t is None and any(trial in g.retired for g in state.groups.values()):
        return Training(False, "an earlier attempt of a retried group: not trained on", trained=True)
    if t is None:
        return Training(None, "not in this run's events: training unknown")
    if t.cancelled:
        return Training(False, "cancelled (its group failed or the run ended): not scored, not trained on")
    if not t.done:
        return Training(None, "still running: trained on once every trial of its group is scored")
    if not t.scored:
        return Training(False, f"not scored ({t.outcome}): its group is not trained on")
    group = state.groups.get((t.step, t.group))
    if group is not None and group.ok is False:
        return Training(False, "its group failed (a trial was not scored): no trial of it is trained on")
    rewards = _known(group.trial_rewards(state.trials)) if group is not None else None
    if rewards is None or t.reward is None:
        return Training(None, "waiting for the rest of its group")
    trained = t.step < state.trained_steps
    advantage = t.reward - sum(rewards) / len(rewards)
    pending = "" if trained else f" (step {t.step} not trained yet)"
    if _all_same(rewards):
        reward = format_value(rewards[0])
        if _removes_constant_groups(state) and not _kept_when_all_constant(state, t.step, t.group):
            return Training(
                False,
                f"group dropped: every trial got reward {reward}, no signal (remove_constant_reward_groups)" + pending,
                0.0,
                trained,
            )
        return Training(
            True, f"trained on, no signal: every trial of its group got reward {reward}" + pending, 0.0, trained
        )
    return Training(True, "trained on" + pending, advantage, trained)
