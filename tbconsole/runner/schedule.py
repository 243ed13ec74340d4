"""Which task each group of a training batch runs, given the changes made to the tasks' places.

The recipe's order is round-robin over the sorted tasks: batch ``i`` holds task indices
``j % n`` for ``j`` in ``[i·gpb, (i+1)·gpb)``. The difficulty ledger's actions change a task's
*weight* (0: dropped; 1: the default share; 2: twice as many groups) from a given batch on, so
the order is generalised as stride scheduling: each task has a *pass*, every group goes to the
active task with the lowest pass (ties: the lower index), whose pass then grows by 1/weight.
With every weight 1 this is exactly the recipe's round-robin, so a run that changes nothing
trains on the same batches as before. A re-admitted task starts at the current lowest pass
(it does not catch up on the groups it missed). A batch keeps its size (the recipe's
``groups_per_batch``; the last batch of the last epoch may be shorter), so dropping tasks moves
the sandbox budget to the others rather than shrinking it.

Deterministic: the batches follow from the task count, the batch size and the list of changes
(each with the batch it applies from, in the order they were made) — the ``task.admission``
events a resumed run reads back from its ``events.jsonl``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tbconsole.state.ledger import MAX_WEIGHT


@dataclass(frozen=True)
class Change:
    step: int  # the first batch it applies to
    task: int  # the task's index in the sorted task list
    weight: float  # 0: out of the batches


class Schedule:
    """The batches' task indices, computed in order and kept (each batch is asked for more than
    once: by the cookbook, then again at the batch's boundary)."""

    def __init__(self, n_tasks: int, groups_per_batch: int, total_groups: int):
        if n_tasks <= 0 or groups_per_batch <= 0:
            raise ValueError("a schedule needs tasks and groups per batch")
        self.n_tasks = n_tasks
        self.groups_per_batch = groups_per_batch
        self.total_groups = total_groups
        self.changes: list[Change] = []
        self._batches: list[list[int]] = []
        self._weights = [1.0] * n_tasks
        self._passes = [0.0] * n_tasks

    def add(self, change: Change) -> None:
        """A change from ``change.step`` on. A change to a batch already computed recomputes from
        there (a resumed run replays its history before asking for any batch)."""
        if not 0 <= change.task < self.n_tasks:
            raise ValueError(f"no task {change.task}")
        self.changes.append(change)
        if change.step < len(self._batches):
            self._reset()

    def weights_at(self, step: int) -> list[float]:
        """Each task's weight for batch ``step``."""
        self.batch(step)
        weights = [1.0] * self.n_tasks
        for change in self.changes:
            if change.step <= step:
                weights[change.task] = change.weight
        return weights

    def batch(self, index: int) -> list[int]:
        while len(self._batches) <= index:
            self._batches.append(self._next(len(self._batches)))
        return self._batches[index]

    def _reset(self) -> None:
        self._batches = []
        self._weights = [1.0] * self.n_tasks
        self._passes = [0.0] * self.n_tasks

    def _next(self, index: int) -> list[int]:
        for change in self.changes:
            if change.step == index:
                self._apply(change)
        size = max(0, min(self.groups_per_batch, self.total_groups - index * self.groups_per_batch))
        active = [k for k in range(self.n_tasks) if self._weights[k] > 0]
        picks = []
        for _ in range(size if active else 0):
            task = min(active, key=lambda k: (self._passes[k], k))
            picks.append(task)
            self._passes[task] += 1.0 / self._weights[task]
        return picks

    def _apply(self, change: Change) -> None:
        was = self._weights[change.task]
        weight = max(0.0, min(MAX_WEIGHT, change.weight))
        if was == 0 and weight > 0:
            active = [self._passes[k] for k in range(self.n_tasks) if self._weights[k] > 0 and k != change.task]
            if active:
                self._passes[change.task] = max(self._passes[change.task], min(active))
        self._weights[change.task] = weight


def round_robin(n_tasks: int, groups_per_batch: int, total_groups: int, index: int) -> Sequence[int]:
    """The recipe's own order, for comparison: batch ``index``'s task indices."""
    start = index * groups_per_batch
    return [j % n_tasks for j in range(start, min(start + groups_per_batch, total_groups))]
