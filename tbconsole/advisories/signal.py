"""no-signal: groups whose trials all got the same reward. Their advantages are all zero, so the
step learns nothing from them. All solved is success (the tasks are too easy to teach more); all
failed happens by chance too, and how often depends on the batch: a group of n trials of a policy
that solves a share p of its tasks fails as a whole with probability (1-p)^n (and is all the same
with p^n + (1-p)^n). With 2 groups of 4 at p = 0.25 that is one group in three: a step or three
of them is what a run that then learns shows.

Null hypothesis (H0): every trial solves its task independently with the solve rate the run shows
over its last ``advise.no_signal_steps`` steps. The rule holds, under key ``no-signal``:

- info, per step with groups without signal: how many, and how likely that is under H0;
- warning: over those steps, at least ``advise.no_signal_share`` of the groups all failed (or all
  got one lower reward), and that many is less likely than ``advise.no_signal_p`` under H0 (the
  failures cluster in groups: some tasks the policy never solves);
- error (the run is not learning; a person should look now): every group of the last
  ``advise.no_signal_steps`` steps had no signal and none was all solved, so every update of
  those steps was zero, and that is less likely than ``advise.no_signal_p`` under the solve rate
  the run had before them (at its start: one trial a group, p = 1/n);

and under ``no-signal:<task>`` a warning for a task all failed in its last two or more groups in
a row, when that is less likely than ``advise.no_signal_p`` at the run's solve rate so far.
"""

from __future__ import annotations

import statistics
from typing import Any

from tbconsole.advisories.base import Advice, Rule, share, step_done
from tbconsole.advisories.chance import all_fail, all_same, at_least
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel

PERSISTENT = 2  # a task's groups in a row, all failed, before the per-task test is made


def _chance(p: float) -> str:
    """A probability as a short percentage (0.3%, 12%, <0.1%)."""
    if p < 0.001:
        return "<0.1%"
    return f"{100 * p:.1f}%" if p < 0.1 else f"{100 * p:.0f}%"


class NoSignal(Rule):
    name = "no-signal"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.groups: dict[tuple[int, int], list[float]] = {}  # (step, group) → rewards of the ok attempt
        self.tasks: dict[tuple[int, int], str] = {}  # (step, group) → its task
        self.done: set[int] = set()
        self.judged: list[list[tuple[str, list[float]]]] = []  # per judged step: (task, rewards) of its groups
        self.runs: dict[str, list[int]] = {}  # task → group sizes of its latest groups in a row, all failed
        self.solved = 0  # the run's trials so far, solved and all (trained groups only)
        self.trials = 0

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.GroupStarted):
            self.tasks[(item.step, item.group)] = item.task
            return
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

    def _solved(self, reward: float) -> bool:
        return reward >= self.t.solved_reward

    def _failed_flat(self, rewards: list[float]) -> bool:
        """No signal and not success: every trial the same reward, below solved."""
        return len(set(rewards)) == 1 and not self._solved(rewards[0])

    def _judge(self, step: int) -> None:
        keys = sorted(k for k in self.groups if k[0] == step)
        rows = [(self.tasks.get(k, f"group {k[1]}"), self.groups.pop(k)) for k in keys]
        for k in keys:
            self.tasks.pop(k, None)
        if not rows:
            return
        self.judged.append(rows)
        window = self.judged[-self.t.no_signal_steps :]
        for _, rewards in rows:
            self.solved += sum(self._solved(r) for r in rewards)
            self.trials += len(rewards)
        self._judge_window(step, rows, window)
        self._judge_tasks(step, rows)
        del self.judged[: -self.t.no_signal_steps]  # older steps live on as counts (solved, trials)

    def _judge_window(self, step: int, rows: list[tuple[str, list[float]]], window: list) -> None:
        t = self.t
        groups = [rewards for step_rows in window for _, rewards in step_rows]
        trials = [r for rewards in groups for r in rewards]
        p = sum(self._solved(r) for r in trials) / len(trials)
        failed = sum(self._failed_flat(r) for r in groups)
        pvalue = at_least(failed, [all_fail(p, len(r)) for r in groups])
        steps = len(window)
        # what the run solved before these steps: the error's H0 (at the start, one trial a group)
        earlier_solved = self.solved - sum(self._solved(r) for r in trials)
        earlier_trials = self.trials - len(trials)
        p0 = earlier_solved / earlier_trials if earlier_trials and earlier_solved else None
        basis = f"the solve rate {p0:.2g} it had before" if p0 is not None else ""
        if p0 is None:  # nothing solved yet: the least that gives a group a signal, one trial in n
            p0 = 1 / statistics.median(len(r) for r in groups)
            basis = f"one solved trial a group, p = {p0:.2g}"
        threshold = f"advise.no_signal_p={t.no_signal_p:g} over advise.no_signal_steps={t.no_signal_steps}"
        if steps >= t.no_signal_steps and failed == len(groups):
            zero = 1.0
            for rewards in groups:
                zero *= all_fail(p0, len(rewards))
            if zero < t.no_signal_p:
                held = self.conditions.get(self.name)
                if held is not None and held.severity == LogLevel.ERROR:
                    return  # still not learning: raised once (one bell), not again every step
                self.hold(
                    Advice(
                        key=self.name,
                        severity=LogLevel.ERROR,
                        message=(
                            f"step {step}: no group of the last {steps} steps had a signal ({len(groups)} groups, "
                            f"{len(trials)} trials, none solved): every update was zero — the run is not learning "
                            f"(at {basis}: {_chance(zero)} likely); "
                            "look at the tasks' transcripts"
                        ),
                        threshold=threshold,
                        value=round(zero, 6),
                        step=step,
                    )
                )
                return
        if failed / len(groups) >= t.no_signal_share and pvalue < t.no_signal_p:
            self.hold(
                Advice(
                    key=self.name,
                    severity=LogLevel.WARNING,
                    message=(
                        f"step {step}: over the last {steps} steps {share(failed, len(groups))} groups all failed "
                        f"while the run solves {p:.0%} of its trials ({_chance(pvalue)} likely by chance) — some tasks "
                        "teach nothing; look at the all-failed tasks' transcripts"
                    ),
                    threshold=f"{threshold}, advise.no_signal_share={t.no_signal_share:g}",
                    value=round(pvalue, 6),
                    step=step,
                )
            )
            return
        self._describe(step, rows, p)

    def _describe(self, step: int, rows: list[tuple[str, list[float]]], p: float) -> None:
        """This step's groups without signal, as info with how likely they are (or clear)."""
        flat = [r for _, r in rows if len(set(r)) == 1]  # one trial a group: never a signal either
        if not flat:
            self.release(self.name, f"step {step}: every group had a signal")
            return
        solved = sum(1 for r in flat if self._solved(r[0]))
        failed = sum(1 for r in flat if r[0] <= 0)
        other = len(flat) - solved - failed
        kinds = ", ".join(
            f"{n} {what}" for n, what in ((failed, "all failed"), (solved, "all solved"), (other, "all equal")) if n
        )
        if solved == len(flat):
            what = "success: every trial of them solved its task; harder tasks would teach more"
        else:
            chance = at_least(len(flat), [all_same(p, len(r)) for _, r in rows])
            what = f"{_chance(chance)} likely by chance at the solve rate {p:.2g}; no trend yet"
        self.hold(
            Advice(
                key=self.name,
                severity=LogLevel.INFO,
                message=f"step {step}: {share(len(flat), len(rows))} groups had no signal ({kinds}) — {what}",
                threshold=f"advise.no_signal_p={self.t.no_signal_p:g}",
                value=round(len(flat) / len(rows), 4),
                step=step,
            )
        )

    def _judge_tasks(self, step: int, rows: list[tuple[str, list[float]]]) -> None:
        """A task all failed in its latest groups in a row, improbably at the run's solve rate."""
        t = self.t
        p = self.solved / self.trials if self.trials else 0.0
        for task, rewards in rows:
            key = f"{self.name}:{task}"
            if not self._failed_flat(rewards):
                self.runs.pop(task, None)
                self.release(key, f"step {step}: {task} had a signal again")
                continue
            sizes = self.runs.setdefault(task, [])
            sizes.append(len(rewards))
            if len(sizes) < PERSISTENT:
                continue
            chance = 1.0
            for n in sizes:
                chance *= all_fail(p, n)
            if chance >= t.no_signal_p:
                continue
            self.warn(
                key=key,
                message=(
                    f"step {step}: {task} all failed in its last {len(sizes)} groups ({sum(sizes)} trials) while the "
                    f"run solves {p:.0%} of its trials ({_chance(chance)} likely by chance) — read its transcripts: "
                    "the task, its tests or its environment may be broken"
                ),
                threshold=f"advise.no_signal_p={t.no_signal_p:g}",
                value=round(chance, 6),
                step=step,
            )
