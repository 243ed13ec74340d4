"""The training tasks' places in the batches, changed while the run goes on: the user's actions
from the difficulty ledger (``drop_task``, ``readmit_task``, ``weight_task``) and the skip policy
(``ledger.skip_after`` constant groups in a row → out for ``ledger.skip_steps`` batches, then
back for a re-check).

Every change is a ``task.admission`` event naming the first batch it applies to — the next batch
not yet started — so it takes effect at the batch boundary, is recorded before anything acts on
it, and a resumed run reads the same changes back from ``events.jsonl`` (``replay``) and trains
on the same batches (``runner.schedule``). The held-out evaluation's tasks are not training tasks
and cannot be named here.

Unlike the cookbook's ``remove_constant_reward_groups`` (which drops a constant group from the
*training data* after its trials ran, so its sandboxes are still paid for), a skipped task is not
run at all: its share of the batch goes to the other tasks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import chz

from tbconsole.harbor.taskset import CONFIG_FILE
from tbconsole.record.control import ControlError
from tbconsole.record.enums import AdmissionBy, ControlCommand, GroupSignal
from tbconsole.record.events import Event, GroupEnded, GroupStarted, TaskAdmission, TrialEnded
from tbconsole.runner.schedule import Change, Schedule
from tbconsole.state.ledger import DEFAULT_FAMILY_PATTERN, Ledger, family_of, parse_task_weight

# What a resumed run reads back from its events.jsonl: its changes, and its groups for the policy.
ADMISSION_KINDS = (TaskAdmission.kind, GroupStarted.kind, GroupEnded.kind, TrialEnded.kind)


def task_families(task_dirs: Iterable[Path], pattern: str) -> dict[str, str]:
    """Each task's family (``state.ledger.family_of``: its task.toml's ``[metadata] category``,
    else its name by ``pattern``), for ``run.started``: every view reads it from there."""
    out = {}
    for task_dir in task_dirs:
        category = None
        try:
            with open(task_dir / CONFIG_FILE, "rb") as f:
                category = tomllib.load(f).get("metadata", {}).get("category")
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            pass
        out[task_dir.name] = family_of(task_dir.name, category, pattern)
    return out


@chz.chz
class LedgerOptions:
    """``ledger.*``: the difficulty ledger's family rule and skip policy (off by default)."""

    # A task's family when its task.toml has no [metadata] category: its name with this regex's
    # matches removed (the demo's 014-count-lines-100 -> count-lines).
    family_pattern: str = DEFAULT_FAMILY_PATTERN
    # Skip a task after this many groups in a row that were all solved or all failed (0: never).
    skip_after: int = 0
    # ... for this many batches; then it comes back for one re-check group.
    skip_steps: int = 10
    skip_solved: bool = True  # all-solved streaks count
    skip_failed: bool = True  # all-failed streaks count


def options_problems(options: LedgerOptions) -> list[str]:
    import re

    problems = []
    if options.skip_after < 0:
        problems.append("ledger.skip_after must be 0 (off) or more")
    if options.skip_steps < 1:
        problems.append("ledger.skip_steps must be 1 or more")
    try:
        re.compile(options.family_pattern)
    except re.error as exc:
        problems.append(f"ledger.family_pattern is not a regular expression: {exc}")
    return problems


@dataclass
class _Place:
    weight: float = 1.0
    by: str | None = None
    since: int | None = None
    until: int | None = None  # a policy skip: the batch it comes back in
    weight_before: float = 1.0  # what a policy skip gives back


class TaskAdmissions:
    """Owns the schedule's changes for one run. Called on the runner's event loop."""

    def __init__(
        self,
        tasks: list[str],
        schedule: Schedule,
        options: LedgerOptions,
        publish: Callable[[Event], None],
        next_batch: int = 0,
    ):
        self.tasks = tasks
        self.index = {name: i for i, name in enumerate(tasks)}
        self.schedule = schedule
        self.options = options
        self._publish = publish
        self.next_batch = next_batch  # the first batch a change made now applies to
        self.places = {name: _Place() for name in tasks}
        self.ledger = Ledger()  # the policy's view: the run's groups, folded as the console folds them

    # -- what happened before (a resumed run) ------------------------------------------------

    def replay(self, events: Iterable[Event]) -> None:
        """Fold an earlier start's events: its groups (for the policy's streaks) and its changes
        (into the schedule, in the order they were made)."""
        for event in events:
            if isinstance(event, TaskAdmission):
                if event.task in self.index:
                    self._record(event.task, event.weight, event.step, event.by, event.until, publish=None)
            else:
                self.observe(event)

    def observe(self, event: Event) -> None:
        """A bus subscriber: the run's training groups, for the policy."""
        self.ledger.observe(event)

    # -- the user's actions ------------------------------------------------------------------

    def request(self, command: str, argument: str) -> None:
        """``drop_task TASK``, ``readmit_task TASK``, ``weight_task TASK=WEIGHT``: from the next
        batch on. ControlError for an unknown task, a bad weight, or dropping the last task."""
        if command == ControlCommand.WEIGHT_TASK:
            try:
                task, weight = parse_task_weight(argument)
            except ValueError as exc:
                raise ControlError(f"weight_task: {exc}") from None
        elif command == ControlCommand.DROP_TASK:
            task, weight = argument, 0.0
        elif command == ControlCommand.READMIT_TASK:
            task = argument
            weight = 1.0
        else:
            raise ControlError(f"not a task command: {command!r}")
        if task not in self.index:
            raise ControlError(f"no training task named {task!r} (held-out tasks cannot be changed)")
        place = self.places[task]
        if command == ControlCommand.READMIT_TASK:
            if place.weight > 0 and place.until is None:
                raise ControlError(f"task {task} is not dropped")
            weight = place.weight_before if place.weight_before > 0 else 1.0
        if weight == 0 and not [t for t, p in self.places.items() if p.weight > 0 and t != task]:
            raise ControlError(f"task {task} is the last one in the batches: it cannot be dropped")
        reason = {
            ControlCommand.DROP_TASK: "dropped from the ledger",
            ControlCommand.READMIT_TASK: "re-admitted from the ledger",
        }.get(ControlCommand(command), f"weight set to {weight:g} from the ledger")
        self._record(task, weight, self.next_batch, AdmissionBy.USER, None, publish=reason)

    # -- the batch boundary --------------------------------------------------------------------

    def open_batch(self, step: int) -> None:
        """Batch ``step`` starts now: the policy's skips and come-backs for it are made, and
        changes made from now on apply to the batch after it."""
        self.next_batch = max(self.next_batch, step)
        if self.options.skip_after > 0:
            self._policy(step)
        self.next_batch = step + 1

    def _policy(self, step: int) -> None:
        for task, place in self.places.items():
            if place.by == AdmissionBy.POLICY and place.weight == 0 and place.until is not None and place.until <= step:
                self._record(task, place.weight_before, step, AdmissionBy.POLICY, None, publish="back for a re-check")
        kinds = {GroupSignal.ALL_SOLVED} if self.options.skip_solved else set()
        if self.options.skip_failed:
            kinds.add(GroupSignal.ALL_FAILED)
        for task, place in self.places.items():
            if place.weight == 0:
                continue
            streak, kind = self.ledger.streak(task, before=step)
            if streak < self.options.skip_after or kind not in kinds:
                continue
            if place.since is not None and self.ledger.newest_step(task, step) < place.since:
                continue  # back for a re-check that has not run yet: the old streak is not new news
            if not [t for t, p in self.places.items() if p.weight > 0 and t != task]:
                continue  # never skip the last task in the batches
            what = "solved" if kind == GroupSignal.ALL_SOLVED else "failed"
            until = step + self.options.skip_steps
            why = f"{streak} groups in a row all {what}; back at step {until} for a re-check"
            self._record(task, 0.0, step, AdmissionBy.POLICY, until, publish=why)

    def _record(self, task: str, weight: float, step: int, by: str, until: int | None, publish: str | None) -> None:
        place = self.places[task]
        if weight == 0 and place.weight > 0:
            place.weight_before = place.weight
        place.weight, place.by, place.since, place.until = weight, by, step, until
        self.schedule.add(Change(step=step, task=self.index[task], weight=weight))
        self.ledger.admission(task, weight, step, by, publish, until)
        if publish is not None:  # the console's log says it too (the reducer's task.admission line)
            self._publish(TaskAdmission(task=task, weight=weight, step=step, by=by, reason=publish, until=until))
