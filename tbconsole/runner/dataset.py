"""The recipe's dataset: Harbor task folders as cookbook RL groups.

Harbor drives each episode (agent, sandbox, verifier), so the cookbook's ``Env`` objects are
placeholders that are never stepped: the group's trajectories and rewards come from the
rollout strategy (``tbconsole.runner.rollout``), which stores each trial's outcome on the group
builder for ``compute_group_rewards`` to return.

Batch ``i`` holds the groups for task indices ``j % n_tasks``, ``j`` in
``[i·gpb, min((i+1)·gpb, n_tasks·epochs))``; ``len = ceil(n_tasks·epochs / gpb)`` — the
recipe's order, which ``runner.schedule`` keeps exactly until the difficulty ledger changes a
task's place (``runner.admission``): then the batches follow the schedule's weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import chz
from tinker_cookbook.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    RLDataset,
    RLDatasetBuilder,
    StepResult,
    Trajectory,
)

from tbconsole.harbor.taskset import TaskSetError, discover
from tbconsole.runner.schedule import Schedule


class PlaceholderEnv(Env):
    """Harbor runs the episode; the cookbook only needs an object per trajectory."""

    async def initial_observation(self):  # pragma: no cover - never called by design
        raise RuntimeError("Harbor drives this episode; the env is not stepped")

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:  # pragma: no cover
        raise RuntimeError("Harbor drives this episode; the env is not stepped")


@dataclass
class TrialReward:
    reward: float
    metrics: dict[str, float]


@dataclass
class HarborGroupBuilder(EnvGroupBuilder):
    task_dir: Path
    task_index: int
    batch: int
    group: int  # index within the batch
    group_size: int
    agent_name: str = "agent"
    # Filled by the rollout strategy, in the order of the returned trajectories.
    rewards: list[TrialReward] = field(default_factory=list)
    # Set by the rollout strategy: tells the run's group book that an update takes this group.
    on_trained: Callable[[], None] | None = None
    # Set by the rollout strategy: per trial, the update that sampled each transition.
    transition_weights: list[list[int | None]] = field(default_factory=list)

    @property
    def task_name(self) -> str:
        return self.task_dir.name

    async def make_envs(self) -> Sequence[Env]:
        return [PlaceholderEnv() for _ in range(self.group_size)]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, dict[str, float]]]:
        if len(self.rewards) != len(trajectory_group):
            raise RuntimeError(
                f"group {self.group} of batch {self.batch}: {len(trajectory_group)} trajectories "
                f"but {len(self.rewards)} rewards"
            )
        return [(r.reward, dict(r.metrics)) for r in self.rewards]

    def logging_tags(self) -> list[str]:
        # The cookbook asks each group of an update for its tags as it prepares the update's data
        # (``prepare_minibatch``): the one point where it says which groups an update takes.
        if self.on_trained is not None:
            self.on_trained()
        return ["harbor", self.agent_name, self.task_name]


@dataclass
class HarborDataset(RLDataset):
    tasks: list[Path]
    groups_per_batch: int
    group_size: int
    epochs: int
    agent_name: str = "agent"
    schedule: Schedule = field(init=False)
    # A resumed off-policy run: (the update it resumed at, the untrained groups in drawn order).
    resumed: tuple[int, list[tuple[int, int]]] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.schedule = Schedule(len(self.tasks), self.groups_per_batch, len(self.tasks) * self.epochs)

    def __len__(self) -> int:
        return math.ceil(len(self.tasks) * self.epochs / self.groups_per_batch)

    def get_batch(self, index: int) -> Sequence[HarborGroupBuilder]:
        """What the cookbook's loop samples as its ``index``-th batch: the recipe's batch, or, in
        a resumed off-policy run, the next groups not yet trained (``resume_untrained``)."""
        if self.resumed is None:
            return self.batch_groups(index)
        start, order = self.resumed
        n = self.groups_per_batch
        return [self._builder(step, group) for step, group in order[(index - start) * n : (index - start + 1) * n]]

    def batch_groups(self, index: int) -> list[HarborGroupBuilder]:
        """Batch ``index``'s groups, as drawn (the batch its trials are announced under)."""
        return [self._builder(index, group, task) for group, task in enumerate(self.schedule.batch(index))]

    def resume_untrained(self, start: int, trained: set[tuple[int, int]]) -> int:
        """An off-policy run resumed at update ``start``: an update takes whichever groups return
        first, so the groups trained before the stop are not the first ``start`` batches. The
        loop's batches from ``start`` on are the groups no update trained, in the order they were
        drawn, ``groups_per_batch`` at a time: none trains twice, none is skipped. Returns how many
        groups drawn before the stop run again."""
        order = [(b, g) for b in range(len(self)) for g in range(len(self.schedule.batch(b))) if (b, g) not in trained]
        self.resumed = (start, order)
        return sum(1 for b, _ in order if b < start)

    def _builder(self, step: int, group: int, task: int | None = None) -> HarborGroupBuilder:
        if task is None:
            task = self.schedule.batch(step)[group]
        return HarborGroupBuilder(
            task_dir=self.tasks[task],
            task_index=task,
            batch=step,
            group=group,
            group_size=self.group_size,
            agent_name=self.agent_name,
        )


@chz.chz
class HarborDatasetBuilder(RLDatasetBuilder):
    tasks_dir: str  # directory of Harbor task directories (each with a task.toml)
    groups_per_batch: int = 4  # tasks per batch
    group_size: int = 4  # trajectories per task; advantages are computed within a group
    epochs: int = 1  # passes over the dataset

    def task_dirs(self) -> list[Path]:
        return discover(Path(self.tasks_dir).expanduser())

    async def __call__(self) -> tuple[HarborDataset, None]:
        return HarborDataset(
            tasks=self.task_dirs(),
            groups_per_batch=self.groups_per_batch,
            group_size=self.group_size,
            epochs=self.epochs,
        ), None


__all__ = ["HarborDataset", "HarborDatasetBuilder", "HarborGroupBuilder", "TaskSetError", "TrialReward"]
