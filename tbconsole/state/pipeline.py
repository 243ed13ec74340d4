"""Sampling and training as a pipeline: which update trained each group and how stale its weights
were, the groups dropped and what they cost, each update's training interval, the off-policy
limit and its history, and how many groups are in flight, queued, trained and dropped over time.

Folded by the reducer (``tbconsole.state.reducer``) from ``run.started`` (``training_mode``,
``max_steps_off_policy``), ``off_policy.limit``, ``group.started`` / ``group.ended`` (a group is in
flight from its start until it returns), ``group.trained``, ``group.dropped``,
``training.started`` and ``step.metrics`` (an update's end: its metrics row, which the runner
writes just before its ``batch.ended``). Pure, bounded, and
filled in every training mode: a synchronous run's groups are trained by the update of their own
step (staleness 0). A run recorded before ``group.trained`` existed has its returned groups taken
as trained by their step's update when that update ends.

A group's staleness: the update that trained it less the first update whose weights sampled it
(``update - weights[0]``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tbconsole.record.enums import TrainingMode

SERIES_LEN = 4000  # count changes kept for the chart over time (the newest)
DROPPED_LEN = 200  # dropped groups kept by name (the totals stay exact)
UPDATES_LEN = 500  # updates whose interval is kept

Key = tuple[int, int]  # (step, group)


def staleness_of(update: int | None, weights: list[int]) -> int | None:
    """How many updates the weights that sampled a group lag the update that trained it."""
    if update is None or not weights:
        return None
    return max(0, update - weights[0])


@dataclass
class UpdateSpan:
    """One update (a training step): when it began (``training.started``) and ended (its metrics
    row), and the groups it trained, by their staleness."""

    update: int
    started: float | None = None
    ended: float | None = None
    groups: int = 0
    staleness: dict[int, int] = field(default_factory=dict)  # staleness -> groups
    last_return: float | None = None  # when the newest group it trained returned

    def interval(self, now: float) -> tuple[float, float] | None:
        """(start, end) on the wall clock; an update still training ends at ``now``."""
        start = self.started
        if start is None:
            return None
        end = self.ended if self.ended is not None else now
        return start, max(start, end)


@dataclass
class LimitChange:
    """``max_steps_off_policy`` from update ``from_update`` on, set ``by`` ("config" or who lowered it)."""

    ts: float
    limit: int
    from_update: int
    by: str


@dataclass
class DroppedGroup:
    """A group whose trials ran but which no update trained (``group.dropped``)."""

    ts: float
    step: int
    group: int
    task: str
    reason: str  # a DropReason value
    weights: list[int]
    update: int
    trials: int
    sandbox_seconds: float
    datums: int


@dataclass
class PipelineState:
    mode: str = TrainingMode.SYNC  # a TrainingMode value (one a newer writer added is kept as it came)
    limit: int | None = None  # max_steps_off_policy now (None: not off-policy)
    configured_limit: int | None = None
    limits: list[LimitChange] = field(default_factory=list)
    remove_constant: bool = False  # config.remove_constant_reward_groups: such groups never train
    in_flight: dict[Key, float] = field(default_factory=dict)  # started, not returned: -> started
    queued: dict[Key, float] = field(default_factory=dict)  # returned, not trained: -> returned
    trained: int = 0
    dropped: int = 0
    skipped: int = 0  # returned with one reward for all, which the run does not train
    dropped_by_reason: dict[str, int] = field(default_factory=dict)
    dropped_sandbox_s: float = 0.0
    dropped_groups: deque[DroppedGroup] = field(default_factory=lambda: deque(maxlen=DROPPED_LEN))
    staleness: dict[int, int] = field(default_factory=dict)  # trained groups by staleness
    updates: dict[int, UpdateSpan] = field(default_factory=dict)
    # (ts, in flight, queued, trained, dropped) at each change, oldest first
    series: deque[tuple[float, int, int, int, int]] = field(default_factory=lambda: deque(maxlen=SERIES_LEN))
    sampling_busy_s: float = 0.0  # time some group was in flight, up to ``since``
    training_busy_s: float = 0.0  # time of the updates that ended
    since: float | None = None  # the last change counted into sampling_busy_s (None: the run is not going)
    reported: bool = False  # the run reports group.trained (else trained groups are inferred)

    # -- reading ---------------------------------------------------------------------------

    @property
    def off_policy(self) -> bool:
        return self.mode == TrainingMode.ASYNC

    @property
    def stale_trained(self) -> int:
        """Trained groups sampled with weights at least one update old."""
        return sum(n for s, n in self.staleness.items() if s > 0)

    def sampling_busy(self, now: float) -> float:
        """Seconds some group was sampling (in flight), up to ``now``."""
        busy = self.sampling_busy_s
        if self.since is not None and self.in_flight:
            busy += max(0.0, now - self.since)
        return busy

    def training_busy(self, now: float) -> float:
        """Seconds the trainer spent on updates, the one under way counted up to ``now``."""
        busy = self.training_busy_s
        if self.since is not None:
            for span in self.updates.values():
                if span.started is not None and span.ended is None:
                    busy += max(0.0, now - span.started)
        return busy

    def current_update(self) -> UpdateSpan | None:
        """The update training now (begun, not ended), if any."""
        going = [u for u in self.updates.values() if u.started is not None and u.ended is None]
        return max(going, key=lambda u: u.update) if going else None

    # -- folding (the reducer calls these) ---------------------------------------------------

    def start(self, ts: float, mode: str, limit: int | None, remove_constant: bool, until: float | None) -> None:
        """A start (or a resume; ``until``: the earlier start's last event): groups left from an
        earlier start will not return, and the time between the two counts as nothing."""
        if until is not None:
            self._count(until)
        until = self.since if until is None else until
        self.mode = mode or TrainingMode.SYNC
        self.limit = self.configured_limit = limit
        self.remove_constant = remove_constant
        self.in_flight.clear()
        self.queued.clear()
        for span in self.updates.values():  # an update cut off by a crash ends where it stood
            if span.started is not None and span.ended is None:
                self._end_update(span, max(span.started, until or span.started))
        self.since = ts
        self._point(ts)

    def end(self, ts: float) -> None:
        """The run ended: what was in flight or queued never will be trained (the runner tells
        the groups it dropped before)."""
        self._count(ts)
        for span in self.updates.values():
            if span.started is not None and span.ended is None:
                self._end_update(span, ts)
        self.in_flight.clear()
        self.queued.clear()
        self.since = None
        self._point(ts)

    def set_limit(self, ts: float, limit: int, from_update: int, by: str) -> None:
        self.limit = limit
        if self.configured_limit is None:
            self.configured_limit = limit
        self.limits.append(LimitChange(ts, limit, from_update, by))
        del self.limits[:-50]

    def group_started(self, ts: float, key: Key) -> None:
        self._count(ts)
        self.queued.pop(key, None)
        self.in_flight[key] = ts
        self._point(ts)

    def group_ended(self, ts: float, key: Key, ok: bool, rewards: list[float | None]) -> None:
        """A group returned (``ok``: every trial scored) or failed (a retry or the run's end follows)."""
        self._count(ts)
        self.in_flight.pop(key, None)
        if ok:
            scored = [r for r in rewards if r is not None]
            if self.remove_constant and len(scored) == len(rewards) and len(set(scored)) <= 1:
                self.skipped += 1
            else:
                self.queued[key] = ts
        self._point(ts)

    def group_trained(self, ts: float, key: Key, update: int, weights: list[int]) -> int | None:
        """Returns the group's staleness (None: its weights are not known)."""
        self._count(ts)
        self.reported = True
        returned = self.queued.pop(key, None)
        self.in_flight.pop(key, None)
        staleness = staleness_of(update, weights)
        self._trained(update, staleness, returned)
        self._point(ts)
        return staleness

    def group_dropped(self, ts: float, dropped: DroppedGroup) -> None:
        self._count(ts)
        key = (dropped.step, dropped.group)
        self.queued.pop(key, None)
        self.in_flight.pop(key, None)
        self.dropped += 1
        self.dropped_by_reason[dropped.reason] = self.dropped_by_reason.get(dropped.reason, 0) + 1
        if dropped.sandbox_seconds > 0:
            self.dropped_sandbox_s += dropped.sandbox_seconds
        self.dropped_groups.append(dropped)
        self._point(ts)

    def training_started(self, ts: float, update: int) -> None:
        span = self._update(update)
        span.started, span.ended = ts, None

    def update_ended(self, ts: float, update: int) -> list[Key]:
        """The update's metrics row came. A run that does not report
        group.trained: its returned groups of step ``update`` are taken as trained by it;
        returns those."""
        inferred: list[Key] = []
        if not self.reported and self.mode != TrainingMode.ASYNC:
            self._count(ts)
            inferred = [key for key in self.queued if key[0] == update]
            for key in inferred:
                self._trained(update, 0, self.queued.pop(key))
            if inferred:
                self._point(ts)
        span = self.updates.get(update)
        if span is None and (inferred or not self.reported):
            span = self._update(update)
        if span is None:
            return inferred
        if span.started is None:  # no training.started (an older run): from its last group's return
            span.started = min(ts, span.last_return) if span.last_return is not None else None
        if span.started is not None:
            if span.ended is None:
                self._end_update(span, ts)
        return inferred

    # -- internals ---------------------------------------------------------------------------

    def _trained(self, update: int, staleness: int | None, returned: float | None) -> None:
        self.trained += 1
        span = self._update(update)
        span.groups += 1
        if returned is not None and (span.last_return is None or returned > span.last_return):
            span.last_return = returned
        if staleness is not None:
            self.staleness[staleness] = self.staleness.get(staleness, 0) + 1
            span.staleness[staleness] = span.staleness.get(staleness, 0) + 1

    def _end_update(self, span: UpdateSpan, ts: float) -> None:
        assert span.started is not None
        span.ended = max(span.started, ts)
        self.training_busy_s += span.ended - span.started

    def _update(self, update: int) -> UpdateSpan:
        span = self.updates.get(update)
        if span is None:
            span = self.updates[update] = UpdateSpan(update)
            if len(self.updates) > UPDATES_LEN:
                for old in sorted(self.updates)[: len(self.updates) - UPDATES_LEN]:
                    del self.updates[old]
        return span

    def _count(self, ts: float) -> None:
        """Time up to ``ts`` with some group in flight counts as sampling."""
        if self.since is not None:
            if self.in_flight and ts > self.since:
                self.sampling_busy_s += ts - self.since
            self.since = max(self.since, ts)

    def _point(self, ts: float) -> None:
        point = (ts, len(self.in_flight), len(self.queued), self.trained, self.dropped)
        if self.series and self.series[-1][0] == ts:
            self.series[-1] = point
        elif not self.series or self.series[-1][1:] != point[1:]:
            self.series.append(point)
