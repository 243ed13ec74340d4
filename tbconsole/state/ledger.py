"""The difficulty ledger: per task (and per family), what each training step's groups taught and
what they cost. A group whose trials all got the same reward (all solved, all failed) trains
nothing — the cookbook's advantages are all zero — yet it cost ``group_size`` sandboxes; on TB2
most of a batch's sandbox hours can go to such groups. The ledger keeps, per task: solve rate per
step and over the run, the streak of constant groups it is on, sandbox time spent and the part of
it spent in groups that carried no signal, and the task's place in the batches (weight, dropped,
skipped by the policy).

Pure: folded from events (``group.started``, ``group.ended``, ``trial.ended``, ``task.admission``,
``run.started``) by the console's reducer and by the runner (which applies the skip policy), so
live, attach and replay all show the same numbers. Training groups only: the held-out evaluation
never enters it. A retried group replaces its earlier attempt, as in the rest of the state."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from tbconsole.record.enums import GroupSignal
from tbconsole.record.events import Event, GroupDropped, GroupEnded, GroupStarted, TrialEnded

# The demo's variants, 014-count-lines-100 (materialized: the run's order, then the variant's
# number) -> count-lines; a TB2 name such as fix-git has no match and is its own family.
DEFAULT_FAMILY_PATTERN = r"^\d+-|-\d+$"
SOLVED_REWARD = 1.0  # a trial is solved at this reward or above (TaskStats uses the same)
MAX_WEIGHT = 10.0  # a task's weight in the batches: 0 (out) to this


def parse_task_weight(argument: str) -> tuple[str, float]:
    """``TASK=WEIGHT`` (``weight_task``'s argument) as (task, weight); ValueError saying what is
    wrong otherwise."""
    task, sep, value = argument.rpartition("=")
    if not sep or not task:
        raise ValueError(f"weight_task takes TASK=WEIGHT, not {argument!r}")
    try:
        weight = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not 0 <= weight <= MAX_WEIGHT:
        raise ValueError(f"the weight must be between 0 and {MAX_WEIGHT:g}")
    return task, weight


def family_of(task: str, category: object = None, pattern: str = DEFAULT_FAMILY_PATTERN) -> str:
    """The one rule for a task's family: its task.toml's ``[metadata] category`` where it has one
    (TB2's tasks do: software-engineering, security, …; the demo's generated tasks carry their
    family's name: count-lines, …), else its name by ``pattern`` (``family_by_name``). The runner
    applies it once and records the result in ``run.started`` (``task_families``); every view reads
    that through ``Ledger.family``, which falls back to the name for a run recorded without it."""
    if isinstance(category, str) and category.strip():
        return category.strip()
    return family_by_name(task, pattern)


def family_by_name(task: str, pattern: str = DEFAULT_FAMILY_PATTERN) -> str:
    """A task's family by its name: the name with ``pattern``'s matches removed (the whole name
    when nothing is left)."""
    try:
        return re.sub(pattern, "", task) or task
    except re.error:
        return task


def signal_of(rewards: list[float]) -> GroupSignal:
    """What a finished group's rewards teach."""
    if len(set(rewards)) > 1:
        return GroupSignal.MIXED
    if rewards and rewards[0] >= SOLVED_REWARD:
        return GroupSignal.ALL_SOLVED
    if rewards and rewards[0] <= 0.0:
        return GroupSignal.ALL_FAILED
    return GroupSignal.CONSTANT


@dataclass
class GroupRecord:
    """One training group of a task: its rewards once it ended well (every trial scored), and its
    trials' sandbox seconds (failed attempts' included: that time was spent)."""

    step: int
    group: int
    task: str
    rewards: list[float] | None = None  # None: not ended, or ended with a failure (not scored)
    sandbox_s: float = 0.0
    dropped: str | None = None  # why no update trained it (group.dropped: a DropReason value)

    @property
    def signal(self) -> GroupSignal | None:
        return signal_of(self.rewards) if self.rewards else None


@dataclass
class Admission:
    """A task's place in the batches now: weight 1 by default, 0 when dropped or skipped."""

    weight: float = 1.0
    since: int | None = None  # the batch the current weight applies from
    by: str | None = None  # an AdmissionBy value
    reason: str | None = None
    until: int | None = None  # a policy skip: the batch it comes back in


@dataclass
class StepCell:
    """A task's groups in one step (usually one)."""

    scored: int = 0
    solved: int = 0
    reward_sum: float = 0.0
    groups: int = 0
    no_signal: int = 0  # groups with one reward for every trial

    @property
    def solve_rate(self) -> float | None:
        return self.solved / self.scored if self.scored else None


@dataclass
class TaskRow:
    """One task's (or family's) line of the ledger."""

    name: str
    family: str
    cells: dict[int, StepCell]  # by step
    scored: int
    solved: int
    groups: int
    no_signal_groups: int
    sandbox_s: float
    no_signal_s: float  # sandbox seconds of groups that trained nothing (dropped ones apart)
    streak: int  # constant groups in a row, up to the newest (0: the newest was mixed)
    streak_signal: GroupSignal | None  # what that streak is: all solved, all failed, constant
    admission: Admission
    tasks: int = 1  # a family row: how many tasks it holds
    dropped_groups: int = 0  # groups no update trained (group.dropped: stale, abandoned, unfinished)
    dropped_s: float = 0.0  # their sandbox seconds

    @property
    def solve_rate(self) -> float | None:
        return self.solved / self.scored if self.scored else None

    @property
    def wasted_s(self) -> float:
        """Sandbox seconds that trained nothing: groups without signal, and groups dropped."""
        return self.no_signal_s + self.dropped_s

    @property
    def waste_share(self) -> float | None:
        """The share of its sandbox time that trained nothing."""
        return self.wasted_s / self.sandbox_s if self.sandbox_s > 0 else None


@dataclass
class Ledger:
    groups: dict[tuple[int, int], GroupRecord] = field(default_factory=dict)
    families: dict[str, str] = field(default_factory=dict)  # task -> family (run.started)
    admissions: dict[str, Admission] = field(default_factory=dict)  # tasks whose place changed
    changes: list[tuple[int, str, float, str]] = field(default_factory=list)  # (step, task, weight, by)
    family_pattern: str = DEFAULT_FAMILY_PATTERN

    def __post_init__(self) -> None:
        # Each task's groups, and its row as last built: a redraw rebuilds only the rows of tasks
        # whose groups or place changed since, so its cost does not grow with the run's length.
        # Derived from ``groups``, so not fields: a state snapshot keeps the groups alone and a
        # restored ledger indexes them again here.
        self._by_task: dict[str, dict[tuple[int, int], GroupRecord]] = {}
        for key, record in self.groups.items():
            self._by_task.setdefault(record.task, {})[key] = record
        self._rows: dict[str, TaskRow] = {}
        self.rows_built = 0  # how many task rows were built (tests read it)

    # -- folding ---------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Fold one of the run's events (the others are not the ledger's)."""
        if isinstance(event, GroupStarted):
            self.group_started(event.step, event.group, event.task)
        elif isinstance(event, GroupEnded):
            self.group_ended(event.step, event.group, list(event.rewards), event.ok)
        elif isinstance(event, TrialEnded) and isinstance(event.timings, dict):
            self.trial_ended(event.step, event.group, event.timings.get("total"))
        elif isinstance(event, GroupDropped):
            self.group_dropped(event.step, event.group, str(event.reason), event.sandbox_seconds)

    def group_started(self, step: int, group: int, task: str) -> None:
        key = (step, group)
        record = self.groups.get(key)
        if record is None or record.task != task:
            if record is not None:
                self._by_task.get(record.task, {}).pop(key, None)
                self._rows.pop(record.task, None)
            record = self.groups[key] = GroupRecord(step, group, task)
            self._by_task.setdefault(task, {})[key] = record
        else:  # a retry: its rewards are the new attempt's; the time spent before stays spent
            record.rewards = None
        self._rows.pop(task, None)

    def group_ended(self, step: int, group: int, rewards: list[float | None], ok: bool) -> None:
        record = self.groups.get((step, group))
        if record is None:
            return
        scored = [r for r in rewards if isinstance(r, (int, float)) and math.isfinite(r)]
        record.rewards = [float(r) for r in scored] if ok and scored and len(scored) == len(rewards) else None
        self._rows.pop(record.task, None)

    def trial_ended(self, step: int, group: int, seconds: float | None) -> None:
        record = self.groups.get((step, group))
        if record is not None and isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0:
            record.sandbox_s += float(seconds)
            self._rows.pop(record.task, None)

    def group_dropped(self, step: int, group: int, reason: str, seconds: object) -> None:
        """No update will train the group: its sandbox time is waste. Its trials' own times count
        where they came (trial.ended); the runner's sum stands in where none did."""
        record = self.groups.get((step, group))
        if record is None:
            return
        record.dropped = reason[:40]
        if record.sandbox_s <= 0 and isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0:
            record.sandbox_s = float(seconds)
        self._rows.pop(record.task, None)

    def task_of(self, step: int, group: int) -> str | None:
        record = self.groups.get((step, group))
        return record.task if record is not None else None

    def admission(self, task: str, weight: float, step: int, by: str, reason: str | None, until: int | None) -> None:
        self.admissions[task] = Admission(weight, step, by, reason, until)
        self.changes.append((step, task, weight, by))
        self._rows.pop(task, None)

    def set_families(self, families: dict[str, str]) -> None:
        self.families.update(families)
        self._rows.clear()

    def family(self, task: str) -> str:
        """``task``'s family as the runner decided it (``family_of``, in ``run.started``); by its
        name for a task it did not name (a held-out task, a run recorded before it did)."""
        return self.families.get(task) or family_by_name(task, self.family_pattern)

    # -- reading ---------------------------------------------------------------------------

    def newest_step(self, task: str, before: int) -> int:
        """The step of ``task``'s newest group that ended with every trial scored, before step
        ``before`` (-1: none)."""
        steps = [r.step for r in self._by_task.get(task, {}).values() if r.rewards and r.step < before]
        return max(steps, default=-1)

    def streak(self, task: str, before: int | None = None) -> tuple[int, GroupSignal | None]:
        """How many of ``task``'s newest finished groups in a row were constant, and which kind
        (a change of kind ends the streak: solved twice then failed once is a streak of one)."""
        mine = self._by_task.get(task, {}).values()
        ended = [r for r in mine if r.rewards and (before is None or r.step < before)]
        return _streak(sorted(ended, key=lambda r: (r.step, r.group)))

    def rows(self, tasks: list[str] | None = None) -> list[TaskRow]:
        """A row per task: the run's tasks (``tasks``, in order) and any other seen in a group.
        The rows are shared with later calls: read them, do not change them."""
        names = list(dict.fromkeys([*(tasks or []), *self._by_task]))
        out = []
        for name in names:
            row = self._rows.get(name)
            if row is None:
                row = self._rows[name] = self._row(name, list(self._by_task.get(name, {}).values()))
                self.rows_built += 1
            out.append(row)
        return out

    def _row(self, name: str, records: list[GroupRecord]) -> TaskRow:
        cells: dict[int, StepCell] = {}
        sandbox = wasted = dropped_s = 0.0
        dropped = 0
        for record in records:
            sandbox += record.sandbox_s
            if record.dropped is not None:
                dropped += 1
                dropped_s += record.sandbox_s
            if not record.rewards:
                continue
            cell = cells.setdefault(record.step, StepCell())
            cell.groups += 1
            cell.scored += len(record.rewards)
            cell.solved += sum(1 for r in record.rewards if r >= SOLVED_REWARD)
            cell.reward_sum += sum(record.rewards)
            if record.signal != GroupSignal.MIXED:
                cell.no_signal += 1
                if record.dropped is None:  # counted once, as dropped
                    wasted += record.sandbox_s
        streak, kind = _streak(sorted((r for r in records if r.rewards), key=lambda r: (r.step, r.group)))
        return TaskRow(
            name=name,
            family=self.family(name),
            cells=dict(sorted(cells.items())),
            scored=sum(c.scored for c in cells.values()),
            solved=sum(c.solved for c in cells.values()),
            groups=sum(c.groups for c in cells.values()),
            no_signal_groups=sum(c.no_signal for c in cells.values()),
            sandbox_s=sandbox,
            no_signal_s=wasted,
            streak=streak,
            streak_signal=kind,
            admission=self.admissions.get(name, Admission()),
            dropped_groups=dropped,
            dropped_s=dropped_s,
        )

    def family_rows(self, tasks: list[str] | None = None) -> list[TaskRow]:
        """The task rows summed by family (a family's streak: its longest member's)."""
        out: dict[str, TaskRow] = {}
        for row in self.rows(tasks):
            fam = out.get(row.family)
            if fam is None:
                out[row.family] = TaskRow(
                    name=row.family,
                    family=row.family,
                    cells={s: dataclasses.replace(c) for s, c in row.cells.items()},
                    scored=row.scored,
                    solved=row.solved,
                    groups=row.groups,
                    no_signal_groups=row.no_signal_groups,
                    sandbox_s=row.sandbox_s,
                    no_signal_s=row.no_signal_s,
                    streak=row.streak,
                    streak_signal=row.streak_signal,
                    admission=Admission(weight=row.admission.weight),
                    dropped_groups=row.dropped_groups,
                    dropped_s=row.dropped_s,
                )
                continue
            for step, cell in row.cells.items():
                into = fam.cells.setdefault(step, StepCell())
                into.scored += cell.scored
                into.solved += cell.solved
                into.reward_sum += cell.reward_sum
                into.groups += cell.groups
                into.no_signal += cell.no_signal
            fam.cells = dict(sorted(fam.cells.items()))
            fam.scored += row.scored
            fam.solved += row.solved
            fam.groups += row.groups
            fam.no_signal_groups += row.no_signal_groups
            fam.sandbox_s += row.sandbox_s
            fam.no_signal_s += row.no_signal_s
            fam.dropped_groups += row.dropped_groups
            fam.dropped_s += row.dropped_s
            if row.streak > fam.streak:
                fam.streak, fam.streak_signal = row.streak, row.streak_signal
            fam.admission.weight += row.admission.weight
            fam.tasks += 1
        return list(out.values())

    def step_figures(self, step: int) -> dict[str, float]:
        """One step's ledger figures for metrics.jsonl (``ledger/*``): the share of its groups
        and of its sandbox time that carried no signal, and how many tasks are out."""
        records = [r for r in self.groups.values() if r.step == step and r.rewards]
        if not records:
            return {}
        quiet = [r for r in records if r.signal != GroupSignal.MIXED]
        sandbox = sum(r.sandbox_s for r in records)
        figures = {
            "ledger/no_signal_group_share": len(quiet) / len(records),
            "ledger/all_solved_groups": float(sum(r.signal == GroupSignal.ALL_SOLVED for r in records)),
            "ledger/all_failed_groups": float(sum(r.signal == GroupSignal.ALL_FAILED for r in records)),
            "ledger/sandbox_s": sandbox,
            "ledger/tasks_out": float(sum(a.weight == 0 for a in self.admissions.values())),
        }
        if sandbox > 0:
            figures["ledger/no_signal_sandbox_share"] = sum(r.sandbox_s for r in quiet) / sandbox
        return figures


def _streak(records: list[GroupRecord]) -> tuple[int, GroupSignal | None]:
    """The constant groups in a row at the end of ``records`` (finished, in step order)."""
    count, kind = 0, None
    for record in reversed(records):
        signal = record.signal
        if signal == GroupSignal.MIXED or (kind is not None and signal != kind):
            break
        count, kind = count + 1, signal
    return count, kind
