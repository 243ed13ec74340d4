"""no-signal: groups whose trials all got the same reward. Their advantages are all zero, so the
step learns nothing from them. All solved is success (the tasks are too easy to teach more), all
failed is the policy not getting anywhere; the advisory says which, per step and as a trend."""

from __future__ import annotations

from typing import Any

from tbconsole import events as ev
from tbconsole.advisories.base import Advice, Rule, share, step_done
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.enums import AdvisorySeverity


class NoSignal(Rule):
    name = "no-signal"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.groups: dict[tuple[int, int], list[float]] = {}  # (step, group) → rewards of the ok attempt
        self.done: set[int] = set()
        self.streak = 0  # steps in a row over the share (not all solved), up to the last one done

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.GroupEnded):
            if item.ok and item.rewards and all(r is not None for r in item.rewards):
                self.groups[(item.step, item.group)] = [float(r) for r in item.rewards if r is not None]
            else:  # a failed attempt trains nothing; a retry that succeeds replaces it
                self.groups.pop((item.step, item.group), None)
            return
        step = step_done(item)
        if step is None or step in self.done:
            return
        self.done.add(step)
        self._judge(step)

    def _judge(self, step: int) -> None:
        rewards = [r for (s, _), r in sorted(self.groups.items()) if s == step]
        flat = [r for r in rewards if len(set(r)) == 1]  # one trial a group: never a signal either
        if not rewards:
            return
        solved = sum(1 for r in flat if r[0] >= self.t.solved_reward)
        failed = sum(1 for r in flat if r[0] <= 0)
        other = len(flat) - solved - failed
        part = len(flat) / len(rewards)
        threshold = f"advise.no_signal_share={self.t.no_signal_share:g}"
        if part < self.t.no_signal_share:
            self.streak = 0
            self.release(self.name, f"step {step}: {share(len(flat), len(rewards))} groups without signal")
            return
        kinds = ", ".join(
            f"{n} {what}" for n, what in ((failed, "all failed"), (solved, "all solved"), (other, "all equal")) if n
        )
        if solved == len(flat):
            self.streak = 0  # success is no trend to worry about
            severity = AdvisorySeverity.INFO
            what = "success: every trial of them solved its task; harder tasks would teach more"
        else:
            self.streak += 1
            severity = AdvisorySeverity.WARNING
            what = "nothing to learn from them; look at the all-failed tasks' transcripts"
            if self.streak >= self.t.no_signal_steps:
                severity = AdvisorySeverity.ERROR
                what = f"for {self.streak} steps in a row: the run is not learning; {what}"
                threshold += f", advise.no_signal_steps={self.t.no_signal_steps}"
        self.hold(
            Advice(
                key=self.name,
                severity=severity,
                message=f"step {step}: {share(len(flat), len(rewards))} groups had no signal ({kinds}) — {what}",
                threshold=threshold,
                value=round(part, 4),
                step=step,
            )
        )
