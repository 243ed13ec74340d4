"""Runs side by side (``tbconsole compare``): the comparison of 2–4 runs, built from their states.

Each run's events.jsonl is folded through the console's reducer (``RunReading``: read on from
where it stopped, so a live run is followed by reading what it appended); ``build`` then makes
the comparison from the states alone: the training curves on one step axis, the held-out
evaluations, solve rates per task (and per family of variants) and the settings that differ.
No Textual and no wall clock here: the console and ``--text`` both draw what ``build`` returns.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.advisories.training import ENTROPY, KL, REWARD
from tbconsole.record.enums import RunCondition
from tbconsole.record.events import EvaluationEnded, EventsReader
from tbconsole.record.lease import LeaseView, read_lease
from tbconsole.record.runfolder import run_events
from tbconsole.runs.runlist import run_condition, steps_trained
from tbconsole.state import RunState, TaskStats, family_stats, reduce

MIN_RUNS = 2
MAX_RUNS = 4
HELDOUT_METRIC = "eval/heldout/reward"  # the runner's held-out evaluator logs it (runner/heldout.py)
STEP_TIME_METRICS = ("time/total", "time/step", "time/train")
LIVE = (RunCondition.LIVE, RunCondition.PAUSED)


@dataclass(frozen=True)
class SeriesSpec:
    """One trend compared: its name, how it is labelled, the metric keys it is read from (the
    first one a run logs)."""

    name: str
    label: str
    keys: tuple[str, ...]
    unit: str = ""


SERIES: tuple[SeriesSpec, ...] = (
    SeriesSpec("reward", "training reward", (REWARD,)),
    SeriesSpec("heldout", "held-out reward", (HELDOUT_METRIC,)),
    SeriesSpec("kl", "KL sampler–trainer", (KL,)),
    SeriesSpec("entropy", "entropy", (ENTROPY,)),
    SeriesSpec("step_time", "step time", STEP_TIME_METRICS, unit="s"),
)


# -- reading the runs ---------------------------------------------------------------------------


@dataclass
class RunReading:
    """One run as read so far: its state (the reducer's fold of every event read), the held-out
    evaluations that ended (updates behind the weights → mean reward: the state keeps only the
    newest) and its runner's lease. ``read`` folds what the file gained since the last read."""

    path: Path
    state: RunState = field(default_factory=RunState)
    heldout: dict[int, float] = field(default_factory=dict)
    runner: LeaseView | None = None
    reader: EventsReader | None = None

    @classmethod
    def open(cls, path: Path) -> RunReading:
        # ``path`` itself, or the run folder's (not there yet while a run starts: read once written)
        return cls(path=Path(path), reader=EventsReader(run_events(path)))

    def read(self, limit: int = 8 << 20) -> int:
        """Fold every event appended since the last read; returns how many. The lease is read
        again too: whether the run is still going."""
        assert self.reader is not None  # made by ``open``
        folded = 0
        while True:
            events = self.reader.read(limit)
            for event in events:
                reduce(self.state, event)
                if isinstance(event, EvaluationEnded) and self.state.last_evaluation is not None:
                    ended = self.state.last_evaluation
                    if ended.reward is not None:
                        self.heldout[ended.after_updates] = ended.reward
            folded += len(events)
            if not self.reader.more:
                break
        self.state.changed_panels.clear()
        self.state.changed_trials.clear()
        self.runner = read_lease(self.reader.path.parent)
        return folded

    @property
    def folder(self) -> Path:
        """The run folder (the path given may be its events.jsonl)."""
        return self.reader.path.parent if self.reader is not None else self.path

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    @property
    def condition(self) -> str:
        return run_condition(self.state, self.runner) if self.runner is not None else RunCondition.UNKNOWN

    @property
    def live(self) -> bool:
        return self.condition in LIVE


def open_runs(paths: Sequence[Path]) -> list[RunReading]:
    """Each path's run, read to its end now. Raises ``runfolder.NotARun`` for a path without a run,
    ValueError for too few or too many."""
    if not MIN_RUNS <= len(paths) <= MAX_RUNS:
        raise ValueError(f"compare takes {MIN_RUNS} to {MAX_RUNS} runs, not {len(paths)}")
    readings = [RunReading.open(p) for p in paths]
    for reading in readings:
        reading.read()
    return readings


# -- the comparison -----------------------------------------------------------------------------


class _Missing:
    """A setting one run has and another lacks."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class RunSummary:
    label: str  # short and unique among the runs compared
    path: str
    model: str | None
    condition: str  # a RunCondition value
    trained: int
    total_steps: int


@dataclass(frozen=True)
class Series:
    """One trend for every run on one step axis: ``points[i]`` is run i's (step, value) in step
    order; ``steps`` every step any run has a value at."""

    spec: SeriesSpec
    points: tuple[tuple[tuple[int, float], ...], ...]

    @property
    def steps(self) -> list[int]:
        return sorted({s for run in self.points for s, _ in run})

    def at(self, run: int, step: int) -> float | None:
        return dict(self.points[run]).get(step)

    def last(self, run: int) -> tuple[int, float] | None:
        return self.points[run][-1] if self.points[run] else None

    @property
    def empty(self) -> bool:
        return not any(self.points)


@dataclass(frozen=True)
class TaskRow:
    name: str
    cells: tuple[TaskStats | None, ...]  # per run (None: the run never scored it)


@dataclass(frozen=True)
class TaskTable:
    by_family: bool  # rows are families (the ledger's: task.toml's category, else name-003 → name)
    rows: tuple[TaskRow, ...]
    totals: tuple[TaskStats, ...]  # per run, over all its tasks


@dataclass(frozen=True)
class ConfigRow:
    key: str  # dotted: harbor.eval_group_size
    values: tuple[Any, ...]  # per run; MISSING where the run has no such setting


@dataclass(frozen=True)
class Comparison:
    runs: tuple[RunSummary, ...]
    series: tuple[Series, ...]
    tasks: TaskTable
    config: tuple[ConfigRow, ...]

    @property
    def live(self) -> bool:
        return any(r.condition in LIVE for r in self.runs)

    def get(self, name: str) -> Series:
        return next(s for s in self.series if s.spec.name == name)


def build(readings: Sequence[RunReading]) -> Comparison:
    states = [r.state for r in readings]
    labels = run_labels([r.folder for r in readings])
    runs = tuple(
        RunSummary(
            label=label,
            path=str(r.path),
            model=r.state.model_name,
            condition=r.condition,
            trained=steps_trained(r.state),
            total_steps=r.state.total_steps,
        )
        for label, r in zip(labels, readings, strict=True)
    )
    series = tuple(
        Series(spec, tuple(tuple(series_points(r.state, spec, r.heldout)) for r in readings)) for spec in SERIES
    )
    return Comparison(runs, series, task_table(states), config_diff([s.config for s in states]))


def series_points(
    state: RunState, spec: SeriesSpec, heldout: dict[int, float] | None = None
) -> list[tuple[int, float]]:
    """The run's (step, value) for one trend, in step order; a step logged twice (a resumed run
    trains it again) keeps its latest value. Held-out: the evaluations that ended besides the
    logged metric (both keyed by updates behind the weights). Step time without a time metric:
    each trained step's span in the events."""
    by_step: dict[int, float] = {}
    key = next((k for k in spec.keys if k in state.metrics), None)
    if key is not None:
        by_step.update(state.metrics[key])
    if spec.name == "heldout" and heldout:
        by_step.update(heldout)
    if spec.name == "step_time" and key is None:
        for step, summary in state.steps.items():
            if summary.ended is not None and summary.duration is not None:
                by_step[step] = summary.duration
    return sorted(by_step.items())


def run_labels(paths: Sequence[Path]) -> list[str]:
    """Each run's folder name; more of its path where two names are alike, its place where even
    the paths end alike."""
    for depth in (1, 2, 3):
        labels = ["/".join(Path(p).resolve().parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{i + 1}:{Path(p).name}" for i, p in enumerate(paths)]


def task_table(states: Sequence[RunState]) -> TaskTable:
    """Solve rates side by side: per family (each run's ``ledger.family``, as the rewards panel and
    the ledger group them) where any run has a family of several tasks, else per task. Rows run
    by how many runs scored them, then by name."""
    # Copies: a live run's reader goes on changing its own while the comparison is drawn.
    per_run = [[dataclasses.replace(t) for t in s.task_stats.values()] for s in states]
    families = [s.ledger.family for s in states]  # each run's own rule (its run.started)
    by_family = any(
        len({family(t.task) for t in stats}) < len(stats) for stats, family in zip(per_run, families, strict=True)
    )
    if by_family:
        per_run = [family_stats(stats, family) for stats, family in zip(per_run, families, strict=True)]
    cells: dict[str, list[TaskStats | None]] = {}
    for i, stats in enumerate(per_run):
        for s in stats:
            cells.setdefault(s.task, [None] * len(states))[i] = s
    rows = sorted(
        (TaskRow(name, tuple(c)) for name, c in cells.items()),
        key=lambda row: (-sum(c is not None for c in row.cells), row.name),
    )
    totals = tuple(_total(stats) for stats in per_run)
    return TaskTable(by_family, tuple(rows), totals)


def _total(stats: list[TaskStats]) -> TaskStats:
    return TaskStats(
        task="all",
        trials=sum(s.trials for s in stats),
        scored=sum(s.scored for s in stats),
        reward_sum=sum(s.reward_sum for s in stats),
        solved=sum(s.solved for s in stats),
    )


def solve_rate(stats: TaskStats | None) -> float | None:
    return stats.solved / stats.scored if stats is not None and stats.scored else None


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted keys (``harbor.eval_group_size``); lists and other values are
    leaves. An empty mapping stays a leaf, so a setting set to ``{}`` is not lost."""
    if not isinstance(config, dict) or (not config and prefix):
        return {prefix: config}
    out: dict[str, Any] = {}
    for key, value in config.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def config_diff(configs: Sequence[dict[str, Any]]) -> tuple[ConfigRow, ...]:
    """The settings (run.started's config, flattened) on which the runs differ, by key."""
    flat = [flatten(c) for c in configs]
    keys = sorted({k for f in flat for k in f})
    rows = []
    for key in keys:
        values = tuple(f.get(key, MISSING) for f in flat)
        if any(_canonical(v) != _canonical(values[0]) for v in values[1:]):
            rows.append(ConfigRow(key, values))
    return tuple(rows)


def _canonical(value: Any) -> str:
    """One spelling per value: 1 and 1.0 differ in a config as they do on the command line."""
    if value is MISSING:
        return "\0missing"
    return json.dumps(value, sort_keys=True, default=str)


def shown_setting(value: Any) -> str:
    """A setting's value as the config writes it (JSON); ``–`` for one the run lacks."""
    if value is MISSING:
        return "–"
    return value if isinstance(value, str) else json.dumps(value, default=str)
