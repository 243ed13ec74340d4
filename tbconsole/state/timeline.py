"""Where one step's time went: its trials' phases and the training after them, as spans on one
wall-clock axis (the console's waterfall, ``w``), and the share of the step each kind of work took.

Sources, both in the run's folder and read on demand, one step at a time:
- ``events.jsonl``: ``trial.phase`` (each phase's start), ``proxy.request`` (a model call ends at
  its ``ts``; ``total_ms`` back from there is the call, its last ``sample_ms`` the sampler's part),
  ``trial.ended``, ``group.*``, ``batch.*``, ``step.metrics`` (the step trained),
  ``evaluation.*`` (the held-out evaluation that runs before the step samples, or after the last
  step), ``checkpoint.saved`` (its ``step`` counts updates: the save after step N says N+1).
- ``timing_spans.jsonl``, written by the cookbook's training loop: per step, its named spans
  (assembling the data, forward-backward, optimizer step, checkpoint, …) with wall times relative
  to the step's first span. They end just before the step's metrics row (``step.metrics``), which
  anchors them on the axis.

``StepReader`` keeps one step in memory (``StepCollector``), never the whole run: it indexes
where each step's lines begin (a cheap look at each line's head, no JSON decoding) and decodes
only the chosen step's lines; ``refresh`` reads what was appended since the last call (live).
The index (``StepOffsets``) outlives the reader: ``StepReader.for_file`` gives the one kept for
that file, so opening the timeline again reads only the bytes appended since (a day-long run's
100 MB are indexed once, not at each ``w``).
``StepCollector.timeline`` folds what it holds into a ``StepTimeline``; ``shares`` splits the
step's wall time among what ran at each moment (``Share``).

(Over 400 lines: the step's model, the fold that fills it and the reader that feeds it share one
vocabulary of spans and are read together.)
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.common.jsonl import whole_lines
from tbconsole.record.enums import Share, SpanKind, TrialPhase
from tbconsole.record.events import (
    BatchEnded,
    BatchStarted,
    CheckpointSaved,
    EvaluationEnded,
    EvaluationStarted,
    Event,
    GroupEnded,
    GroupStarted,
    ProxyRequest,
    StepMetrics,
    TrialEnded,
    TrialPhaseChanged,
    decode,
)
from tbconsole.record.runfolder import attempt_of

MAX_TURNS = 2000  # model calls kept per trial (a longer trial's earliest are dropped)
MAX_TRAINING_ROWS = 8
READ_CHUNK = 4 << 20  # bytes read per call of ``refresh``: a long run's file is taken in slices
KEPT_INDEXES = 4  # events files whose step index is kept between readers (a few runs opened in turn)


SHARE_OF: dict[SpanKind, Share] = {
    SpanKind.ENVIRONMENT: Share.SANDBOXES,
    SpanKind.AGENT_SETUP: Share.SANDBOXES,
    SpanKind.AGENT: Share.AGENT,
    SpanKind.SAMPLING: Share.SAMPLING,
    SpanKind.VERIFYING: Share.VERIFIER,
    SpanKind.TRAINING: Share.TRAINING,
    SpanKind.CHECKPOINT: Share.TRAINING,
    SpanKind.EVALUATION: Share.EVALUATION,
}

PHASE_SPANS: dict[str, SpanKind] = {
    TrialPhase.QUEUED: SpanKind.QUEUED,
    TrialPhase.ENVIRONMENT: SpanKind.ENVIRONMENT,
    TrialPhase.AGENT_SETUP: SpanKind.AGENT_SETUP,
    TrialPhase.AGENT: SpanKind.AGENT,
    TrialPhase.VERIFYING: SpanKind.VERIFYING,
}

# The cookbook's span names → the training row they belong to, in the order rows are shown (a
# name ending in ``*`` stands for every name it begins). Rollout-side spans (sampling, group
# workers, env steps) are left out: the trial rows show them.
TRAINING_ROWS: tuple[tuple[str, SpanKind, tuple[str, ...]], ...] = (
    ("evaluation", SpanKind.EVALUATION, ("run_evals", "run_evaluations_parallel")),
    ("assemble data", SpanKind.TRAINING, ("assemble_training_data", "prepare_minibatch", "compute_advantages")),
    ("KL", SpanKind.TRAINING, ("incorporate_kl_penalty", "kl_vs_base", "compute_kl_sample_train", "compute_post_kl")),
    ("forward-backward", SpanKind.TRAINING, ("train/fwd_bwd*",)),
    ("optim step", SpanKind.TRAINING, ("train/optim*",)),
    ("train step", SpanKind.TRAINING, ("train_step",)),
    ("checkpoint", SpanKind.CHECKPOINT, ("save_checkpoint", "save_checkpoint_async")),
    ("sampler refresh", SpanKind.TRAINING, ("save_checkpoint_and_get_sampling_client",)),
)


def _named(name: str, names: tuple[str, ...]) -> bool:
    return any(name.startswith(n[:-1]) if n.endswith("*") else name == n for n in names)


ROLLOUT_SPANS = (
    "sampling",
    "do_group_rollout",
    "trajectory_group_worker",
    "env_",
    "policy_sample",
    "compute_group_rewards",
)


@dataclass(frozen=True)
class Span:
    kind: SpanKind
    start: float  # unix seconds
    end: float
    open: bool = False  # still going: ``end`` is the moment the timeline was made


@dataclass
class TrialRow:
    trial: str
    group: int
    index: int  # position in its group (0-based)
    task: str
    attempt: int = 0
    spans: list[Span] = field(default_factory=list)  # phases, in order (agent includes its calls)
    calls: list[Span] = field(default_factory=list)  # each model call's sampling, inside the agent span
    outcome: str | None = None  # a TrialOutcome value once ended
    scored: bool | None = None
    reward: float | None = None
    cancelled: bool = False  # its group ended without it
    phase: str | None = None  # the last phase it reached

    @property
    def label(self) -> str:
        """``g<group>·t<trial>`` as the transcript numbers them (trials from 1), ``-r<N>`` for a retry."""
        return f"g{self.group}·t{self.index + 1}" + (f"-r{self.attempt}" if self.attempt else "")


@dataclass
class TrainingRow:
    label: str
    spans: list[Span]


@dataclass
class StepTimeline:
    step: int
    start: float
    end: float
    trials: list[TrialRow]
    training: list[TrainingRow]
    shares: dict[Share, float]  # seconds of the step's wall time, each moment split among what ran
    trained: bool  # the step's metrics row arrived
    from_spans: bool  # training rows come from the cookbook's timing spans (else from events)
    open: bool  # something was still going when it was made

    @property
    def duration(self) -> float:
        return max(0.0, self.end - self.start)

    def percentages(self) -> list[tuple[Share, float]]:
        """(share, percent of the step's wall time), largest first, those over 0.5% only."""
        total = sum(self.shares.values())
        if total <= 0:
            return []
        out = [(k, 100.0 * v / total) for k, v in self.shares.items() if v > 0]
        return sorted((x for x in out if x[1] >= 0.5), key=lambda x: -x[1])

    def summary(self) -> str:
        """``sampling 62% · sandboxes 20% · verifier 8% · training 10%``."""
        return " · ".join(f"{share} {pct:.0f}%" for share, pct in self.percentages())


# -- one step's events ------------------------------------------------------------------------


@dataclass
class _Trial:
    row: TrialRow
    phases: list[tuple[str, float]] = field(default_factory=list)  # (phase, since)
    calls: list[tuple[float, float, float]] = field(default_factory=list)  # (end, total_s, sample_s)
    ended: float | None = None


class StepCollector:
    """The events of one step, folded as they come (``add``); ``timeline`` draws them up."""

    def __init__(self, step: int):
        self.step = step
        self.trials: dict[str, _Trial] = {}
        self.group_end: dict[int, float] = {}
        self.group_members: dict[int, list[str]] = {}
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.metrics_ts: float | None = None
        self.evaluations: list[list[float | None]] = []  # [started, ended]
        self.checkpoints: list[float] = []
        self.spans: list[dict[str, Any]] | None = None  # the cookbook's spans for this step

    def add(self, event: Event) -> None:
        ts = event.ts
        if isinstance(event, StepMetrics):
            if event.evaluation_only:
                return  # the final evaluation's row: its evaluation events say more
            self.metrics_ts = ts
        elif isinstance(event, GroupStarted):
            self.group_members[event.group] = list(event.trials)
            for i, trial in enumerate(event.trials):
                self._trial(trial, event.group, event.task, i)
        elif isinstance(event, GroupEnded):
            self.group_end[event.group] = ts
            for trial in self.group_members.get(event.group, ()):
                t = self.trials.get(trial)
                if t is not None and t.ended is None:
                    t.ended, t.row.cancelled = ts, True
        elif isinstance(event, TrialPhaseChanged):
            t = self._trial(event.trial, event.group, event.task or "", None)
            if not t.phases or t.phases[-1][0] != event.phase:
                t.phases.append((event.phase, ts))
            t.row.phase = event.phase
        elif isinstance(event, ProxyRequest):
            t = self._trial(event.trial, event.group, "", None)
            total = (event.total_ms or 0.0) / 1000.0
            sample = min(total, (event.sample_ms or 0.0) / 1000.0) if event.sample_ms else 0.0
            t.calls.append((ts, total, sample))
            if len(t.calls) > MAX_TURNS:
                del t.calls[0]
        elif isinstance(event, TrialEnded):
            t = self._trial(event.trial, event.group, "", None)
            t.ended = ts
            t.row.outcome, t.row.scored, t.row.reward, t.row.cancelled = (
                event.outcome,
                event.scored,
                event.reward,
                False,
            )
        elif isinstance(event, EvaluationStarted):
            self.evaluations.append([ts, None])
        elif isinstance(event, EvaluationEnded):
            if self.evaluations and self.evaluations[-1][1] is None:
                self.evaluations[-1][1] = ts
        elif isinstance(event, CheckpointSaved):
            self.checkpoints.append(ts)
        elif not isinstance(event, (BatchStarted, BatchEnded)):
            return
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)

    def _trial(self, trial: str, group: int, task: str, index: int | None) -> _Trial:
        t = self.trials.get(trial)
        if t is None:
            if index is None:
                members = self.group_members.get(group, [])
                index = members.index(trial) if trial in members else len(self.trials)
            t = self.trials[trial] = _Trial(TrialRow(trial, group, index, task, attempt_of(trial)))
        if task and not t.row.task:
            t.row.task = task
        return t

    # -- drawing it up ---------------------------------------------------------------------

    def timeline(self, until: float | None = None, after: StepCollector | None = None) -> StepTimeline | None:
        """The step's timeline; ``until`` closes what is still going (now, or where the run
        ended); ``after``: the evaluation that followed this step, shown with it (the one after
        the last step). None before any of the step's events arrived."""
        evaluations = self.evaluations + (after.evaluations if after is not None else [])
        known = [ts for ts in (self.first_ts, self.last_ts) if ts is not None]
        known += [ts for e in evaluations for ts in e if ts is not None]
        if not known:
            return None
        end_known = max(known)
        close = max(end_known, until) if until is not None else end_known
        rows = [self._row(t, close) for t in self.trials.values()]
        rows.sort(key=lambda r: (r.group, r.attempt, r.index))
        training, from_spans = self._training(close, evaluations)
        spans = [s for r in rows for s in r.spans] + [s for r in training for s in r.spans]
        going = any(s.open for s in spans)
        start = min([*known, *(s.start for s in spans)])
        end = max([close if going or self.metrics_ts is None else end_known, *(s.end for s in spans)])
        return StepTimeline(
            step=self.step,
            start=start,
            end=end,
            trials=rows,
            training=training,
            shares=shares(rows, training, start, end),
            trained=self.metrics_ts is not None,
            from_spans=from_spans,
            open=going,
        )

    def _row(self, t: _Trial, close: float) -> TrialRow:
        row = t.row
        row.spans, row.calls = [], []
        end = t.ended if t.ended is not None else close
        for i, (phase, since) in enumerate(t.phases):
            last = i + 1 == len(t.phases)
            until = end if last else t.phases[i + 1][1]
            kind = PHASE_SPANS.get(phase)
            if kind is not None and (until > since or last):
                row.spans.append(Span(kind, since, max(since, until), open=last and t.ended is None))
        # A call's sampling ends as the call does (what follows it, parsing the reply, is quick).
        row.calls = [Span(SpanKind.SAMPLING, ts - sample, ts) for ts, _total, sample in t.calls if sample > 0]
        return row

    def _training(self, close: float, evaluated: list[list[float | None]]) -> tuple[list[TrainingRow], bool]:
        rows: list[TrainingRow] = []
        evaluations = [
            Span(SpanKind.EVALUATION, s, e if e is not None else close, open=e is None)
            for s, e in evaluated
            if s is not None
        ]
        if evaluations:
            rows.append(TrainingRow("evaluation", evaluations))
        from_spans = False
        anchored = self._anchored_spans()
        if anchored:
            from_spans = True
            for label, kind, names in TRAINING_ROWS:
                if kind is SpanKind.EVALUATION and evaluations:
                    continue
                spans = [Span(kind, s, e) for name, s, e in anchored if _named(name, names)]
                if spans and len(rows) < MAX_TRAINING_ROWS:
                    rows.append(TrainingRow(label, spans))
        else:
            train = self._training_from_events(close)
            if train is not None:
                rows.append(TrainingRow("training", [train]))
            if self.checkpoints:
                rows.append(TrainingRow("checkpoint", [Span(SpanKind.CHECKPOINT, ts, ts) for ts in self.checkpoints]))
        return rows, from_spans

    def _training_from_events(self, close: float) -> Span | None:
        """From the last group's end to the metrics row: the cookbook assembles the batch, trains
        and refreshes the sampler in between. Open while every group has ended but no row came."""
        groups = set(self.group_members)
        if not groups or not groups <= set(self.group_end):
            return None
        start = max(self.group_end.values())
        if self.metrics_ts is not None:
            return Span(SpanKind.TRAINING, start, max(start, self.metrics_ts))
        return Span(SpanKind.TRAINING, start, max(start, close), open=True)

    def _anchored_spans(self) -> list[tuple[str, float, float]]:
        """The cookbook's spans on the wall clock: the last of them ends as the metrics row is
        written (the loop writes the spans, then logs the row)."""
        if not self.spans or self.metrics_ts is None:
            return []
        try:
            last = max(float(s["wall_end"]) for s in self.spans)
            t0 = self.metrics_ts - last
            out = [(str(s["name"]), t0 + float(s["wall_start"]), t0 + float(s["wall_end"])) for s in self.spans]
        except (KeyError, TypeError, ValueError):
            return []
        return [x for x in out if not x[0].startswith(ROLLOUT_SPANS)]


# -- what the wall time went to ---------------------------------------------------------------


def shares(rows: list[TrialRow], training: list[TrainingRow], start: float, end: float) -> dict[Share, float]:
    """Seconds of [start, end] per kind of work. Each moment is split evenly among the lanes busy
    then (a trial's current activity, training, evaluation), so the shares add up to the wall
    time and parallel trials do not count many times over; moments with nothing busy are idle."""
    lanes: list[tuple[float, float, Share]] = []
    for row in rows:
        lanes.extend(_trial_lanes(row))
    # Training and evaluation spans nest (a train step inside the step's training): their union.
    for share in (Share.TRAINING, Share.EVALUATION):
        intervals = [(s.start, s.end) for r in training for s in r.spans if SHARE_OF[s.kind] is share]
        lanes.extend((a, b, share) for a, b in _union(intervals))
    edges: list[tuple[float, int, Share]] = []
    for a, b, share in lanes:
        a, b = max(a, start), min(b, end)
        if b > a:
            edges += [(a, 1, share), (b, -1, share)]
    edges.sort(key=lambda e: (e[0], e[1]))
    out = {share: 0.0 for share in Share}
    busy = {share: 0 for share in Share}
    at = start
    for ts, delta, share in edges:
        _split(out, busy, ts - at)
        at = max(at, ts)
        busy[share] += delta
    _split(out, busy, end - at)
    return out


def _split(out: dict[Share, float], busy: dict[Share, int], seconds: float) -> None:
    if seconds <= 0:
        return
    total = sum(busy.values())
    if not total:
        out[Share.IDLE] += seconds
        return
    for share, n in busy.items():
        if n:
            out[share] += seconds * n / total


def _trial_lanes(row: TrialRow) -> list[tuple[float, float, Share]]:
    """A trial's activities, one at a time: its phases, with the agent's model calls cut out of
    its agent phase as sampling."""
    out: list[tuple[float, float, Share]] = []
    calls = sorted((c.start, c.end) for c in row.calls)
    for span in row.spans:
        share = SHARE_OF.get(span.kind)
        if share is None:
            continue
        if span.kind is not SpanKind.AGENT:
            out.append((span.start, span.end, share))
            continue
        at = span.start
        for a, b in _union(calls):
            a, b = max(a, span.start), min(b, span.end)
            if b <= a:
                continue
            if a > at:
                out.append((at, a, Share.AGENT))
            out.append((a, b, Share.SAMPLING))
            at = b
        if span.end > at:
            out.append((at, span.end, Share.AGENT))
    return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


# -- reading a run's folder, one step at a time ----------------------------------------------

# The head of every events.jsonl line: the writer puts v, kind, ts, then the event's own fields
# in order, and step (or after_updates) comes first for every kind a step's timeline uses.
_HEAD = re.compile(rb'^\{"v":\d+,"kind":"([a-z._]+)","ts":([-+0-9.eE]+),"(?:step|after_updates)":(-?\d+)')
_RUN_ENDED = re.compile(rb'^\{"v":\d+,"kind":"run\.ended","ts":([-+0-9.eE]+)')
_SPANS_HEAD = re.compile(rb'^\{"step":\s*(-?\d+)')
_TRIAL_KINDS = {b"trial.phase", b"group.started", b"batch.started"}
_STEP_KINDS = {
    b"trial.phase",
    b"trial.ended",
    b"proxy.request",
    b"group.started",
    b"group.ended",
    b"batch.started",
    b"batch.ended",
    b"step.metrics",
}
_EVAL_KINDS = {b"evaluation.started", b"evaluation.ended"}


class StepOffsets:
    """Where each step's lines begin in one events file, as far as it has been read (``offset``,
    always at a line's start). Shared by the readers of that file, one at a time (``lock``)."""

    def __init__(self, identity: tuple[int, int] | None = None):
        self.identity = identity  # the file's (device, inode) when it was first read
        self.first: dict[int, int] = {}  # step → offset of its first line
        self.trial_steps: set[int] = set()
        self.steps: list[int] = []  # steps that have trials, in order
        self.run_ended: float | None = None
        self.offset = 0
        self.lock = threading.Lock()


_KEPT: OrderedDict[Path, StepOffsets] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def kept_offsets(events: Path) -> StepOffsets:
    """The index kept for ``events``, or a new one: the file there now must be the one it was
    read from (same device and inode, no shorter than what was read), else it starts over."""
    path = Path(events).resolve()
    try:
        info = os.stat(path)
    except OSError:
        return StepOffsets()
    identity = (info.st_dev, info.st_ino)
    with _KEPT_LOCK:
        index = _KEPT.get(path)
        if index is None or index.identity != identity or index.offset > info.st_size:
            index = _KEPT[path] = StepOffsets(identity)
        _KEPT.move_to_end(path)
        while len(_KEPT) > KEPT_INDEXES:
            _KEPT.popitem(last=False)
        return index


class StepReader:
    """One step's timeline out of a run's ``events.jsonl`` (and the cookbook's spans file, when
    there is one). ``refresh`` reads on from where the index stopped; ``select`` picks another
    step, re-reading the file from where that step's lines begin. Memory: the steps' first
    offsets and one step's folded events."""

    def __init__(self, events: Path, spans: Path | None = None, index: StepOffsets | None = None):
        self.events_path = Path(events)
        self.spans_path = spans
        self.index = index if index is not None else StepOffsets()
        self._folded = 0  # how far the selected step's lines are folded (the index may be further)
        self._step: int | None = None
        self.collector: StepCollector | None = None
        self._evals_next: StepCollector | None = None  # the evaluation after this step (final one)
        self._spans_offset = 0

    @classmethod
    def for_file(cls, events: Path, spans: Path | None = None) -> StepReader:
        """A reader on the index kept for ``events`` (``kept_offsets``)."""
        return cls(events, spans, kept_offsets(events))

    @property
    def step(self) -> int | None:
        return self._step

    @property
    def steps(self) -> list[int]:
        return self.index.steps

    @property
    def run_ended(self) -> float | None:
        return self.index.run_ended

    def select(self, step: int) -> None:
        """Show ``step``: what the index has read so far of it is folded at once."""
        if step == self._step:
            return
        with self.index.lock:
            self._step = step
            self.collector = StepCollector(step)
            self._evals_next = StepCollector(step + 1)
            self._spans_offset = 0
            start = self.index.first.get(step)
            if start is not None:
                self._fold_range(start, self.index.offset)
            self._folded = self.index.offset
        self._read_spans()

    def refresh(self, limit: int = READ_CHUNK) -> bool:
        """Read what was appended (at most ``limit`` bytes). True when there may be more."""
        with self.index.lock:
            return self._refresh(limit)

    def _refresh(self, limit: int) -> bool:
        index = self.index
        if self._step is not None and self._folded < index.offset:  # another reader indexed them
            self._fold_range(max(self._folded, index.first.get(self._step, index.offset)), index.offset)
        self._folded = index.offset
        try:
            with open(self.events_path, "rb") as handle:
                # Whole lines only: a line being written waits for the next call.
                data, more = whole_lines(handle, index.offset, limit)
        except OSError:
            return False
        if not data:
            return more
        pos = index.offset
        for line in data.splitlines(keepends=True):
            self._index(line, pos)
            pos += len(line)
        index.offset += len(data)
        self._folded = index.offset
        self._read_spans()
        return more

    def timeline(self, now: float | None = None) -> StepTimeline | None:
        """The selected step's timeline; ``now`` closes what is still going (None: the last event
        read, as in a replay). A run that ended closes everything where it ended."""
        if self.collector is None or self._step is None:
            return None
        until = now
        if self.run_ended is not None:
            until = self.run_ended if until is None else min(until, self.run_ended)
        # The evaluation after the last step (no trials follow it) is shown with that step.
        after = self._evals_next if self._step + 1 not in self.index.trial_steps else None
        return self.collector.timeline(until, after)

    # -- internals -------------------------------------------------------------------------

    def _index(self, line: bytes, pos: int) -> None:
        index = self.index
        head = _HEAD.match(line)
        if head is None:
            ended = _RUN_ENDED.match(line)
            if ended is not None:
                index.run_ended = float(ended.group(1))
            return
        kind, number = head.group(1), int(head.group(3))
        step = self._step_of(kind, number)
        if step is None:
            return
        if kind in _TRIAL_KINDS and step not in index.trial_steps:
            index.trial_steps.add(step)
            index.steps = sorted(index.trial_steps)
        if step not in index.first:
            index.first[step] = pos
        self._fold(kind, number, line)

    @staticmethod
    def _step_of(kind: bytes, number: int) -> int | None:
        if kind in _STEP_KINDS:
            return number
        if kind == b"checkpoint.saved":
            return number - 1  # saved after step N trained: the weights after N+1 updates
        if kind in _EVAL_KINDS:
            return number  # run before step N samples: the weights after N updates
        return None

    def _fold(self, kind: bytes, number: int, line: bytes) -> None:
        if self.collector is None or self._step is None:
            return
        step = self._step_of(kind, number)
        target = None
        if step == self._step:
            target = self.collector
        elif kind in _EVAL_KINDS and step == self._step + 1 and self._evals_next is not None:
            target = self._evals_next
        if target is None:
            return
        event = decode(line.decode("utf-8", errors="replace"))
        if event is not None:
            target.add(event)

    def _fold_range(self, start: int, end: int) -> None:
        try:
            with open(self.events_path, "rb") as handle:
                handle.seek(start)
                pos = start
                while pos < end:
                    line = handle.readline()
                    if not line:
                        break
                    pos += len(line)
                    head = _HEAD.match(line)
                    if head is not None:
                        self._fold(head.group(1), int(head.group(3)), line)
        except OSError:
            return

    def _read_spans(self) -> None:
        """The cookbook's spans line of the selected step, once it is written."""
        if self.spans_path is None or self.collector is None or self.collector.spans is not None:
            return
        try:
            with open(self.spans_path, "rb") as handle:
                data, _ = whole_lines(handle, self._spans_offset)
        except OSError:
            return
        for line in data.splitlines():
            head = _SPANS_HEAD.match(line)
            if head is None or int(head.group(1)) != self._step:
                continue
            try:
                body = json.loads(line)
            except ValueError:
                continue
            spans = body.get("spans") if isinstance(body, dict) else None
            if isinstance(spans, list):
                self.collector.spans = [s for s in spans if isinstance(s, dict)]
        self._spans_offset += len(data)
