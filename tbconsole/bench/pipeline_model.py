"""The pipeline's model: trial durations and a discrete-event simulation of the training modes.

Trial durations. Terminal-Bench 2 trials are heavy-tailed: the public Terminal-Bench 2.1
leaderboard's Terminus-2 submissions report a mean trial duration between 548 s and 1043 s,
while the tasks' declared agent budgets run from 600 s to 12000 s (median 900 s), and an RL
policy's trials run far longer: a 712-rollout Terminus-2 run (89 tasks x 8) had a mean of 3432 s
with 47.5 % of its rollouts past their task's budget (NVIDIA-NeMo/Gym pull request 3148). No
per-trial table was found, so the shape is an assumption fitted to those means: lognormal, median
480 s (8 min), sigma 1.0 (its mean, 790 s, sits inside the leaderboard's 548–1043 s), capped at
the recipe's agent timeout, 5400 s. ``trial_duration`` draws one trial's duration from a seed, its
task and its index in the group, so every mode of a benchmark runs the very same trials.

The simulation (``simulate``) plays the recipe's size: ``groups`` groups of ``group_size``
trials an update, ``parallel`` of a group's trials at a time, a training step of ``train_s``.

- sync: an update's groups all start together; it trains when the slowest has ended; the next
  batch starts when training ends.
- async (K): the cookbook's ``do_async_training``: ``groups`` workers each run one group at a
  time and start the next as soon as theirs ends, sampling with the latest weights; the trainer
  takes ended groups in the order they ended and trains when it holds ``groups`` of them. A group
  whose sampler is more than K updates behind the update being filled is dropped and its task
  queued again (behind the groups already queued), unless every group has been drawn.

Figures (``SimResult``), over the wall from the first group's start to the last update's end:
updates per hour; the trainer's idle share (no training step running); the samplers' idle share
(``1 - trial-seconds / (slots x wall)``, ``slots = groups x min(group_size, parallel)``: the
fraction of sandbox slot-time with no trial in it); staleness of the trained groups; drops.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

SOURCE = (
    "assumed lognormal fitted to published means: TB2.1 leaderboard Terminus-2 mean trial 548-1043 s; "
    "an RL run's mean 3432 s, 47.5 % past budget (NVIDIA-NeMo/Gym PR 3148)"
)


@dataclass(frozen=True)
class Durations:
    """A trial's duration at full scale: lognormal (``median_s``, ``sigma``), at most ``cap_s``."""

    median_s: float = 480.0
    sigma: float = 1.0
    cap_s: float = 5400.0

    def draw(self, rng: random.Random) -> float:
        return min(self.cap_s, rng.lognormvariate(math.log(self.median_s), self.sigma))

    @property
    def mean_s(self) -> float:
        """The uncapped mean."""
        return self.median_s * math.exp(self.sigma**2 / 2)

    def describe(self) -> str:
        return (
            f"lognormal median {self.median_s:g} s, sigma {self.sigma:g} (mean {self.mean_s:.0f} s), "
            f"capped at {self.cap_s:g} s"
        )


def trial_duration(seed: int, task: str, k: int, durations: Durations, scale: float = 1.0) -> float:
    """Trial ``k`` of ``task``'s duration, times ``scale``: the same for the same arguments, in
    every process (a string seed is hashed, not salted)."""
    return durations.draw(random.Random(f"{seed}:{task}:{k}")) * scale


@dataclass(frozen=True)
class Shape:
    """The recipe's size: groups an update, trials a group, at a time per group, a training step."""

    groups: int = 4
    group_size: int = 8
    parallel: int = 4
    train_s: float = 90.0

    @property
    def slots(self) -> int:
        return self.groups * min(self.group_size, self.parallel)


@dataclass
class SimResult:
    mode: str
    updates: int = 0
    wall_s: float = 0.0
    train_s: float = 0.0  # seconds of training steps
    trial_s: float = 0.0  # trial-seconds inside the wall
    slots: int = 1
    staleness: list[int] = field(default_factory=list)  # per trained group
    dropped: int = 0  # groups

    @property
    def updates_per_hour(self) -> float:
        return self.updates / self.wall_s * 3600 if self.wall_s else float("nan")

    @property
    def trainer_idle(self) -> float:
        return 1 - self.train_s / self.wall_s if self.wall_s else float("nan")

    @property
    def sampler_idle(self) -> float:
        return 1 - self.trial_s / (self.slots * self.wall_s) if self.wall_s else float("nan")

    @property
    def mean_staleness(self) -> float:
        return sum(self.staleness) / len(self.staleness) if self.staleness else 0.0


def group_trials(durations: list[float], parallel: int) -> list[tuple[float, float]]:
    """(start, end) of each trial of a group run ``parallel`` at a time, in order, from 0."""
    free = [0.0] * max(1, min(parallel, len(durations)))
    out = []
    for d in durations:
        start = heapq.heappop(free)
        out.append((start, start + d))
        heapq.heappush(free, start + d)
    return out


def _busy(intervals: list[tuple[float, float]], until: float) -> float:
    return sum(max(0.0, min(end, until) - start) for start, end in intervals)


def simulate(
    mode: str,
    group_durations: list[list[float]],
    shape: Shape,
    updates: int,
    max_steps_off_policy: int = 1,
) -> SimResult:
    """Play ``updates`` updates of ``mode`` ("sync" or "async") on the groups of
    ``group_durations`` in draw order (each group's trial durations; at least ``updates x
    shape.groups`` of them)."""
    if len(group_durations) < updates * shape.groups:
        raise ValueError(f"{updates} updates of {shape.groups} groups need {updates * shape.groups} groups")
    if mode == "sync":
        return _sync(group_durations, shape, updates)
    if mode == "async":
        return _async(group_durations, shape, updates, max_steps_off_policy)
    raise ValueError(f"unknown mode {mode!r} (sync or async)")


def _sync(group_durations: list[list[float]], shape: Shape, updates: int) -> SimResult:
    result = SimResult("sync", slots=shape.slots)
    t = 0.0
    intervals: list[tuple[float, float]] = []
    for u in range(updates):
        batch = group_durations[u * shape.groups : (u + 1) * shape.groups]
        ends = []
        for durations in batch:
            trials = [(t + s, t + e) for s, e in group_trials(durations, shape.parallel)]
            intervals += trials
            ends.append(max(e for _, e in trials))
        t = max(ends) + shape.train_s
        result.train_s += shape.train_s
        result.staleness += [0] * len(batch)
    result.updates, result.wall_s = updates, t
    result.trial_s = _busy(intervals, t)
    return result


def _async(group_durations: list[list[float]], shape: Shape, updates: int, k: int) -> SimResult:
    """Long because it is one event loop whose state (the queue, the workers, the trainer, the
    weights' version) every event reads and writes."""
    result = SimResult(f"async K={k}", slots=shape.slots)
    total = updates * shape.groups  # the cookbook's dataloader draws end_batch batches, no more
    pending: deque[int] = deque(range(total))  # groups to run, in order
    events: list[tuple[float, int, str, int, int]] = []  # (time, seq, kind, group, version)
    seq = iter(range(1 << 62))
    intervals: list[tuple[float, float]] = []
    version = 0  # the update the samplers' weights come from
    filling = 0  # the update being filled
    batch: list[int] = []  # versions of the groups held for it
    training = False
    ready: deque[tuple[int, int]] = deque()  # ended groups (group, version) waiting for the trainer
    drawn_all = False
    end = 0.0

    def start(t: float) -> None:
        nonlocal drawn_all
        if not pending:
            return
        g = pending.popleft()
        if not pending:
            drawn_all = True
        trials = [(t + s, t + e) for s, e in group_trials(group_durations[g], shape.parallel)]
        intervals.extend(trials)
        heapq.heappush(events, (max(e for _, e in trials), next(seq), "group", g, version))

    def take(t: float) -> None:
        nonlocal training, filling
        while not training and ready:
            g, v = ready.popleft()
            if filling - v > k:
                result.dropped += 1
                if not drawn_all:
                    pending.insert(min(len(pending), shape.groups + 1), g)
                continue
            batch.append(v)
            if len(batch) == shape.groups:
                result.staleness += [filling - w for w in batch]
                batch.clear()
                training = True
                heapq.heappush(events, (t + shape.train_s, next(seq), "trained", -1, -1))

    for _ in range(shape.groups):
        start(0.0)
    while events and filling < updates:
        t, _, kind, g, v = heapq.heappop(events)
        if kind == "group":
            ready.append((g, v))
            start(t)
        else:
            training = False
            filling += 1
            version = filling
            result.train_s += shape.train_s
            end = t
        take(t)
    result.updates, result.wall_s = filling, end
    result.trial_s = _busy(intervals, end)
    return result


def project(
    durations: Durations, shape: Shape, updates: int = 400, seed: int = 0, ks: tuple[int, ...] = (1, 2)
) -> list[SimResult]:
    """sync and async K for each of ``ks`` on the same groups: the recipe's size at full scale."""
    groups = [
        [trial_duration(seed, f"task-{g:05d}", j, durations) for j in range(shape.group_size)]
        for g in range(updates * shape.groups)
    ]
    return [simulate("sync", groups, shape, updates)] + [simulate("async", groups, shape, updates, k) for k in ks]


@dataclass(frozen=True)
class Spread:
    """Off-policy K's gain over sync (updates per hour) on ``seeds`` draws of the same size:
    how far one measured draw can sit from another, and from the long run."""

    k: int
    updates: int
    ratios: tuple[float, ...]  # sorted, one per seed

    @property
    def median(self) -> float:
        n = len(self.ratios)
        return (self.ratios[(n - 1) // 2] + self.ratios[n // 2]) / 2

    def share_at_least(self, target: float) -> float:
        return sum(r >= target for r in self.ratios) / len(self.ratios)

    def describe(self) -> str:
        return f"K={self.k} {self.ratios[0]:.2f}-{self.ratios[-1]:.2f}x (median {self.median:.2f}x)"


def spread(
    durations: Durations, shape: Shape, updates: int, scale: float = 1.0, seeds: int = 20, ks: tuple[int, ...] = (1, 2)
) -> list[Spread]:
    """``simulate`` sync and async K on ``seeds`` draws of ``updates x shape.groups`` groups
    (seeds 1000 and up, apart from a bench's own), each K's ratios to sync sorted."""
    ratios: dict[int, list[float]] = {k: [] for k in ks}
    for seed in range(1000, 1000 + seeds):
        groups = [
            [trial_duration(seed, f"task-{g:05d}", j, durations, scale) for j in range(shape.group_size)]
            for g in range(updates * shape.groups)
        ]
        base = simulate("sync", groups, shape, updates).updates_per_hour
        for k in ks:
            ratios[k].append(simulate("async", groups, shape, updates, k).updates_per_hour / base)
    return [Spread(k, updates, tuple(sorted(ratios[k]))) for k in ks]
