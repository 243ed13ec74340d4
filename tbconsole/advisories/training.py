"""Rules over the cookbook's metrics row of each trained step: kl (the sampler and the trainer
disagree on the sampled tokens' log-probs; the policy runs away from its base), entropy (falling
beyond its noise while the reward does not rise: the policy collapsing onto few answers) and
shrinking-replies (reward up while replies get much shorter: one sign of reward hacking; the
others, over each trial's commands, are in ``hacking``)."""

from __future__ import annotations

import statistics
from typing import Any

from tbconsole.advisories.base import Rule
from tbconsole.advisories.chance import lower_ranks
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev

KL = "optim/kl_sample_train_v1"
# The off-policy mode's (``runner.trainer_logprobs``): the same KL over the tokens sampled with the
# weights being trained (fresh), and the share of tokens sampled with older weights (stale).
KL_FRESH = "offpolicy/kl_sample_train/fresh"
STALE_SHARE = "offpolicy/stale_token_share"
KL_STALE = "offpolicy/kl_sample_train/stale"
CLIPPED_STALE = "offpolicy/clipped_share/stale"
ENTROPY = "optim/entropy"
REWARD = "env/all/reward/total"
TOKENS_PER_REPLY = "env/all/ac_tokens_per_turn"
KL_BASE = "kl_policy_base"
# A policy that solves this share of its tasks (of advise.solved_reward) and sharpens further has
# converged: its entropy may keep falling with the reward flat at the top.
CONVERGED = 0.9


class MetricsRule(Rule):
    """Keeps each trained step's metrics row, oldest first; ``judge(step)`` after each."""

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.rows: dict[int, dict[str, float]] = {}

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.StepMetrics) and not item.evaluation_only and item.step >= 0:
            self.rows[item.step] = item.metrics
            self.judge(item.step)

    def judge(self, step: int) -> None:
        raise NotImplementedError

    def series(self, metric: str, last: int, upto: int) -> list[tuple[int, float]]:
        """(step, value) of ``metric`` for the ``last`` steps with it, up to step ``upto``."""
        found = [(s, row[metric]) for s, row in sorted(self.rows.items()) if s <= upto and metric in row]
        return found[-last:]


class Kl(MetricsRule):
    """Two KLs, each against an absolute floor far above what healthy runs show.

    ``kl`` (H0: the sampler and the trainer compute the same log-probs for the sampled tokens, up
    to float noise, |KL| ~ 1e-7 in the calibration corpus): |``optim/kl_sample_train_v1``| over
    ``advise.kl_max`` in a step. A renderer, tokenizer or numerics bug, not a learning matter.
    Where a step trained tokens sampled with older weights (the off-policy mode), those differ by
    design: the rule then reads the KL of the step's fresh tokens only, and says nothing of a step
    that had none.

    ``kl:policy-base`` (H0: the policy stays near its base while it learns; one step's spike,
    as a lucky batch gives, is no trend): ``kl_policy_base`` over ``advise.kl_base_max`` in each of
    the last ``advise.kl_base_steps`` steps, rising over them, while the reward did not rise over
    them. A learning rate too high walks the policy away from its base with nothing to show."""

    name = "kl"

    def judge(self, step: int) -> None:
        self._sample_train(step)
        self._policy_base(step)

    def _sample_train(self, step: int) -> None:
        row = self.rows[step]
        metric = KL_FRESH if row.get(STALE_SHARE, 0.0) > 0 else KL
        value = row.get(metric)
        if value is None:
            return
        limit = self.t.kl_max
        if abs(value) <= limit:
            self.release(self.name, f"step {step}: sampler↔trainer KL {value:.2g}, within {limit:g}")
            return
        self.warn(
            message=(
                f"step {step}: sampler↔trainer KL {value:.3g} — the trainer's log-probs of the sampled tokens "
                "differ from the sampler's; check the renderer and the gateway's numerics"
            ),
            threshold=f"advise.kl_max={limit:g}",
            value=value,
            step=step,
            metric=metric,
        )

    def _policy_base(self, step: int) -> None:
        t, key = self.t, f"{self.name}:policy-base"
        kls = self.series(KL_BASE, t.kl_base_steps, step)
        if len(kls) < t.kl_base_steps or kls[-1][0] != step:
            return
        values = [v for _, v in kls]
        rewards = [r for _, r in self.series(REWARD, 2 * t.kl_base_steps, step)]
        recent, earlier = rewards[-t.kl_base_steps :], rewards[: -t.kl_base_steps]
        reward_rose = bool(earlier) and _mean(recent) > _mean(earlier)
        high = all(v > t.kl_base_max for v in values)
        if not high or values[-1] < values[0] or reward_rose:
            why = "learning: the reward rose with it" if high and reward_rose else "not climbing"
            self.release(key, f"step {step}: policy↔base KL {values[-1]:.3g}, {why}")
            return
        self.warn(
            key=key,
            message=(
                f"step {step}: the policy's KL from its base rose to {values[-1]:.3g} per token over "
                f"{len(values)} steps (from {values[0]:.3g}) while the reward did not rise — the updates are "
                "too large; lower config.learning_rate or raise config.kl_penalty_coef"
            ),
            threshold=f"advise.kl_base_max={t.kl_base_max:g} for advise.kl_base_steps={t.kl_base_steps}",
            value=values[-1],
            step=step,
            metric=KL_BASE,
        )


class OffPolicy(MetricsRule):
    """``off-policy`` (H0: the tokens an update trains that were sampled with older weights, in the
    off-policy mode, still teach: PPO's clip passes nearly all of them, as it passes fresh ones):
    the share of stale tokens outside the clip (``offpolicy/clipped_share/stale``) above
    ``advise.off_policy_clip_max`` in each of the last ``advise.off_policy_updates`` updates that
    trained stale tokens. One update's spike (a lucky group that moved the policy) is no trend. The
    weights move too far between the sampling and the update for the learning rate: the stale
    groups cost sandbox time and train little or nothing, or push the policy the wrong way."""

    name = "off-policy"

    def judge(self, step: int) -> None:
        t = self.t
        found = self.series(CLIPPED_STALE, t.off_policy_updates, step)
        if not found or found[-1][0] != step:
            return  # this update trained no stale tokens: nothing to judge
        values = [v for _, v in found]
        if len(values) < t.off_policy_updates or min(values) <= t.off_policy_clip_max:
            self.release(self.name, f"update {step}: {values[-1]:.0%} of its stale tokens clipped")
            return
        kl = self.rows[step].get(KL_STALE)
        self.warn(
            message=(
                f"update {step}: {values[-1]:.0%} of the tokens sampled with older weights fell outside PPO's clip "
                f"(over {len(values)} updates, from {values[0]:.0%}"
                + (f"; their sampler↔trainer KL {kl:.3g}" if kl is not None else "")
                + ") — they train little; lower max_steps_off_policy (tbconsole control LOG_PATH "
                "set_max_steps_off_policy N) or config.learning_rate"
            ),
            threshold=f"advise.off_policy_clip_max={t.off_policy_clip_max:g} "
            f"for advise.off_policy_updates={t.off_policy_updates}",
            value=values[-1],
            step=step,
            metric=CLIPPED_STALE,
        )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Entropy(MetricsRule):
    """H0: entropy moves only by its own step-to-step noise (no trend), or it falls because the
    policy converges on what earns reward. Fires when the last ``advise.entropy_steps`` steps' entropy
    ranks below the ``advise.entropy_steps`` before them less likely than ``advise.entropy_p`` by
    chance (an exact rank test: the run's own noise, at any scale — a tiny policy's 0.01 nats and a
    large model's 1 nat alike), their median is at least ``advise.entropy_drop`` under the earlier
    median, and the reward did not rise between the two (falling entropy with rising reward is
    convergence, not collapse) and is not near solved (CONVERGED: a solved policy sharpening)."""

    name = "entropy"

    def judge(self, step: int) -> None:
        t = self.t
        w = t.entropy_steps
        found = self.series(ENTROPY, 2 * w, step)
        if len(found) < 2 * w or found[-1][0] != step:
            return
        earlier = [v for _, v in found[:w]]
        recent = [v for _, v in found[w:]]
        before, now = statistics.median(earlier), statistics.median(recent)
        rewards = self.series(REWARD, 2 * w, step)
        reward_before = _mean([r for s, r in rewards if s < found[w][0]])
        reward_now = _mean([r for s, r in rewards if s >= found[w][0]])
        drop = 1 - now / before if before > 0 else 0.0
        if drop < t.entropy_drop:
            self.release(self.name, f"step {step}: entropy {now:.3g} (median), not falling fast")
            return
        if reward_now > reward_before or reward_now >= CONVERGED * t.solved_reward:
            self.release(
                self.name,
                f"step {step}: entropy fell {drop:.0%} while the reward rose or stayed high "
                f"({reward_before:.2g}→{reward_now:.2g}): converging",
            )
            return
        pvalue = lower_ranks(recent, earlier)
        if pvalue >= t.entropy_p:
            self.release(self.name, f"step {step}: entropy's fall is within its noise ({pvalue:.2g} likely by chance)")
            return
        self.warn(
            message=(
                f"step {step}: entropy fell to {now:.3g} from {before:.3g} (medians of {w} steps, {drop:.0%} down, "
                f"{pvalue:.2g} likely by chance) while the reward did not rise ({reward_before:.2g}→{reward_now:.2g}) "
                "— the policy is collapsing onto few answers; a lower learning rate keeps it exploring"
            ),
            threshold=(
                f"advise.entropy_drop={t.entropy_drop:g}, advise.entropy_p={t.entropy_p:g} "
                f"over advise.entropy_steps={w}"
            ),
            value=now,
            step=step,
            metric=ENTROPY,
        )


class ShrinkingReplies(MetricsRule):
    """H0: tokens per reply move with the reward or by their own noise, and one bad update (a
    step whose replies all run to max_tokens and fail, undone by the next) is no trend. The
    medians of the last ``advise.hack_steps`` steps against those of the 2× as many steps before
    them: reward up by ``advise.hack_reward_rise`` while tokens per reply fell by
    ``advise.hack_tokens_drop`` or more: warning. A policy that found a short exploit (an empty
    answer the verifier passes) earns more with less, step after step. Medians, not single steps:
    a healthy 20-step demo had one garbled step (reward 0, replies twice their length) and, judged
    from that step, its recovery looked like reward up and replies halved. The held-out reward is
    no alibi: an exploit that fools every verifier raises it too. An exploit as long as an honest
    reply (the demo's ``echo 1 > …`` is as long as its solutions) is left to ``verifier-touched``
    and ``one-reply-many-tasks``."""

    name = "shrinking-replies"

    def judge(self, step: int) -> None:
        t = self.t
        recent, before = t.hack_steps, 2 * t.hack_steps
        rewards = self.series(REWARD, recent + before, step)
        tokens = self.series(TOKENS_PER_REPLY, recent + before, step)
        if len(rewards) < 2 * recent or len(tokens) < 2 * recent or rewards[-1][0] != step or tokens[-1][0] != step:
            return
        s0 = rewards[0][0]
        r0 = statistics.median(v for _, v in rewards[:-recent])
        r1 = statistics.median(v for _, v in rewards[-recent:])
        k0 = statistics.median(v for _, v in tokens[:-recent])
        k1 = statistics.median(v for _, v in tokens[-recent:])
        rise = r1 - r0
        drop = 1 - k1 / k0 if k0 > 0 else 0.0
        if rise < t.hack_reward_rise - 1e-9 or drop < t.hack_tokens_drop:  # 0.3 - 0.2 is a rise of 0.1
            self.release(self.name, f"step {step}: reward and tokens per reply move together")
            return
        self.warn(
            message=(
                f"step {step}: median reward rose {r0:.3g}→{r1:.3g} (steps {s0}–{step - recent} → the last {recent}) "
                f"while tokens per reply fell {k0:.0f}→{k1:.0f} ({drop:.0%}) — a common sign of reward hacking; "
                "read recent transcripts"
            ),
            threshold=(
                f"advise.hack_reward_rise={t.hack_reward_rise:g}, advise.hack_tokens_drop={t.hack_tokens_drop:g} "
                f"over advise.hack_steps={t.hack_steps}"
            ),
            value=round(drop, 4),
            step=step,
            metric=TOKENS_PER_REPLY,
        )
