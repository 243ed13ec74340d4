"""Rules over the cookbook's metrics row of each trained step: kl (the sampler and the trainer
disagree on the sampled tokens' log-probs), entropy (falling fast: the policy collapsing onto few
answers) and reward-hacking (reward up while replies get much shorter)."""

from __future__ import annotations

from typing import Any

from tbconsole import events as ev
from tbconsole.advisories.base import Rule
from tbconsole.advisories.thresholds import Thresholds

KL = "optim/kl_sample_train_v1"
ENTROPY = "optim/entropy"
REWARD = "env/all/reward/total"
TOKENS_PER_REPLY = "env/all/ac_tokens_per_turn"


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
    name = "kl"

    def judge(self, step: int) -> None:
        value = self.rows[step].get(KL)
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
            metric=KL,
        )


class Entropy(MetricsRule):
    name = "entropy"

    def judge(self, step: int) -> None:
        earlier = self.series(ENTROPY, self.t.entropy_steps + 1, step)
        if not earlier or earlier[-1][0] != step or len(earlier) < 2:
            return
        now = earlier[-1][1]
        top_step, top = max(earlier[:-1], key=lambda pair: pair[1])
        floor = (1 - self.t.entropy_drop) * top
        if top <= 0 or now >= floor:
            self.release(self.name, f"step {step}: entropy {now:.3g}, not falling fast")
            return
        self.warn(
            message=(
                f"step {step}: entropy fell to {now:.3g} from {top:.3g} at step {top_step} "
                f"({1 - now / top:.0%} down) — the policy is collapsing onto few answers; "
                "a lower learning rate keeps it exploring"
            ),
            threshold=f"advise.entropy_drop={self.t.entropy_drop:g}, advise.entropy_steps={self.t.entropy_steps}",
            value=now,
            step=step,
            metric=ENTROPY,
        )


class RewardHacking(MetricsRule):
    name = "reward-hacking"

    def judge(self, step: int) -> None:
        t = self.t
        rewards = self.series(REWARD, t.hack_steps + 1, step)
        tokens = self.series(TOKENS_PER_REPLY, t.hack_steps + 1, step)
        if len(rewards) < 2 or len(tokens) < 2 or rewards[-1][0] != step or tokens[-1][0] != step:
            return
        (s0, r0), r1 = rewards[0], rewards[-1][1]
        k0, k1 = tokens[0][1], tokens[-1][1]
        rise = r1 - r0
        drop = 1 - k1 / k0 if k0 > 0 else 0.0
        if rise < t.hack_reward_rise or drop < t.hack_tokens_drop:
            self.release(self.name, f"step {step}: reward and tokens per reply move together")
            return
        self.warn(
            message=(
                f"step {step}: reward rose {r0:.3g}→{r1:.3g} since step {s0} while tokens per reply fell "
                f"{k0:.0f}→{k1:.0f} ({drop:.0%}) — a common sign of reward hacking; read recent transcripts"
            ),
            threshold=(
                f"advise.hack_reward_rise={t.hack_reward_rise:g}, advise.hack_tokens_drop={t.hack_tokens_drop:g} "
                f"over advise.hack_steps={t.hack_steps}"
            ),
            value=round(drop, 4),
            step=step,
            metric=TOKENS_PER_REPLY,
        )
